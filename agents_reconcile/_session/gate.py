"""The gate: settle pending intents before every model call, or refuse the call.

``install_gate`` composes it into a ``RunConfig`` as ``call_model_input_filter`` (which the
SDK runs before each model call of ``Runner.run``, ``run_sync`` and ``run_streamed``, fresh
or resumed), together with a ``session_input_callback`` that keeps a retried input from
reaching the model twice (and otherwise builds the input exactly as the SDK would).
``gate_hooks`` offers the same gate as ``RunHooks.on_llm_start``,
and runs it in ``on_tool_start`` too: a RunState resumed from a checkpoint older than the
session executes its approved tools before any model call, and only a tool hook can stop that.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from agents import RunConfig, RunHooks
from agents.run_config import CallModelData, ModelInputData

from .._core.run_context import GATE_MARK
from .._sdk import ORPHAN_PRUNING, require

_drop_orphans: Callable[..., Any] | None
try:  # The SDK's own pruning, to prune exactly as it does (a private helper).
    from agents.run_internal.items import drop_orphan_function_calls as _drop_orphans
except ImportError:  # pragma: no cover - install_gate refuses to merge without it
    _drop_orphans = None

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionInputCallback

    from .admission import Admission

__all__ = ["gate_hooks", "install_gate"]


def install_gate(session: Admission, base: RunConfig | None = None) -> RunConfig:
    """Return ``base`` (or a new ``RunConfig``) with the gate composed into it.

    With reconciliation switched off, ``base`` comes back unchanged (``None`` becomes a
    plain ``RunConfig()``).
    """
    config = base if base is not None else RunConfig()
    if not session.enabled or getattr(config.call_model_input_filter, GATE_MARK, None) is session:
        return config
    user_filter = config.call_model_input_filter

    async def gate(data: CallModelData[Any]) -> ModelInputData:
        await session.admit(_mapping(data.context))
        if user_filter is None:
            return data.model_data
        result = user_filter(data)
        return await result if inspect.isawaitable(result) else result

    # Marked with its session, so installing the gate twice leaves one gate.
    setattr(gate, GATE_MARK, session)
    if not session.merges_retried_input:
        return dataclasses.replace(config, call_model_input_filter=gate)
    if _drop_orphans is None:
        # Without the SDK's own pruning the model's input could differ from the SDK's.
        require(ORPHAN_PRUNING, instead="ReconcileConfig(merge_retried_input=False) needs it not.")
    return dataclasses.replace(
        config,
        call_model_input_filter=gate,
        session_input_callback=_merging_retried_input(session, config),
    )


def _merging_retried_input(session: Admission, config: RunConfig) -> SessionInputCallback:
    """A ``session_input_callback`` that leaves out a retried input (the batch just settled as
    committed, sent again), then does what the caller's callback, or the SDK without one, does."""
    user_callback = config.session_input_callback
    run_settings = config.session_settings

    async def merge_retried_input(
        history: list[TResponseInputItem], new_input: list[TResponseInputItem]
    ) -> list[TResponseInputItem]:
        if session.is_retried_input(history, new_input):
            new_input = []
        if user_callback is None:
            return _as_without_callback(
                history, new_input, limited=session.history_limit(run_settings) is not None
            )
        result = user_callback(history, new_input)
        return await result if inspect.isawaitable(result) else result

    return merge_retried_input


def _as_without_callback(
    history: list[TResponseInputItem], new_input: list[TResponseInputItem], *, limited: bool
) -> list[TResponseInputItem]:
    """The model input the SDK builds when no callback is set. It then also drops the tool
    outputs a history limit cut off from their calls (the Responses API refuses an output
    without its call); with a callback set it does not, so this callback does it. The items
    are the very objects given (the SDK tells history from new input by identity)."""
    combined = history + new_input
    if not limited:
        return combined
    assert _drop_orphans is not None  # install_gate requires it
    stored = set(range(len(history)))
    pruned: list[TResponseInputItem] = _drop_orphans(
        combined, pruning_indexes=stored, output_pruning_indexes=stored
    )
    return pruned


def _mapping(context: Any) -> MutableMapping[str, Any] | None:
    return context if isinstance(context, MutableMapping) else None


class _GateHooks(RunHooks[Any]):
    """Runs the gate in ``on_llm_start``, then delegates every hook to ``base``."""

    def __init__(self, session: Admission, base: RunHooks[Any] | None) -> None:
        self.session = session
        self._base = base if base is not None else RunHooks()

    async def on_llm_start(self, context: Any, agent: Any, *args: Any, **kwargs: Any) -> None:
        await self.session.admit(_mapping(getattr(context, "context", None)))
        await self._base.on_llm_start(context, agent, *args, **kwargs)

    async def on_llm_end(self, *args: Any, **kwargs: Any) -> None:
        await self._base.on_llm_end(*args, **kwargs)

    async def on_agent_start(self, *args: Any, **kwargs: Any) -> None:
        await self._base.on_agent_start(*args, **kwargs)

    async def on_agent_end(self, context: Any, agent: Any, *args: Any, **kwargs: Any) -> None:
        # The run's final output: its save comes next, and a state that ends there must
        # never be resumed into a second answer.
        self.session.final_output(_mapping(getattr(context, "context", None)))
        await self._base.on_agent_end(context, agent, *args, **kwargs)

    async def on_handoff(self, *args: Any, **kwargs: Any) -> None:
        await self._base.on_handoff(*args, **kwargs)

    async def on_tool_start(self, context: Any, agent: Any, *args: Any, **kwargs: Any) -> None:
        # A resumed RunState runs its approved tools before any model call: check it here.
        await self.session.admit_tool(_mapping(getattr(context, "context", None)), context)
        await self._base.on_tool_start(context, agent, *args, **kwargs)

    async def on_tool_end(self, *args: Any, **kwargs: Any) -> None:
        await self._base.on_tool_end(*args, **kwargs)


def _delegating(name: str) -> Any:
    """A hook of ``RunHooks`` this module does not name, passed on to ``base`` as it is."""
    if inspect.iscoroutinefunction(getattr(RunHooks, name)):

        async def delegate_async(self: _GateHooks, *args: Any, **kwargs: Any) -> Any:
            return await getattr(self._base, name)(*args, **kwargs)

        delegate_async.__name__ = name
        return delegate_async

    def delegate(self: _GateHooks, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._base, name)(*args, **kwargs)

    delegate.__name__ = name
    return delegate


# Hooks a later SDK adds reach ``base`` too, not the SDK's no-op defaults.
for _name in dir(RunHooks):
    if _name.startswith("on_") and _name not in vars(_GateHooks):
        setattr(_GateHooks, _name, _delegating(_name))


def gate_hooks(session: Admission, base: RunHooks[Any] | None = None) -> RunHooks[Any]:
    """``RunHooks`` whose ``on_llm_start`` runs the gate; ``base`` keeps receiving every hook."""
    if not session.enabled:
        return base if base is not None else RunHooks()
    if isinstance(base, _GateHooks) and base.session is session:
        return base  # already gated by this session: one gate
    return _GateHooks(session, base)
