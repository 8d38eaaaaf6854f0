"""The gate: settle pending intents before every model call, or refuse the call.

``install_gate`` composes it into a ``RunConfig`` as ``call_model_input_filter`` (which the
SDK runs before each model call of ``Runner.run``, ``run_sync`` and ``run_streamed``, fresh
or resumed), together with a ``session_input_callback`` that keeps a retried input from
reaching the model twice. ``gate_hooks`` offers the same gate as ``RunHooks.on_llm_start``,
and runs it in ``on_tool_start`` too: a RunState resumed from a checkpoint older than the
session executes its approved tools before any model call, and only a tool hook can stop that.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

from agents import RunConfig, RunHooks
from agents.run_config import CallModelData, ModelInputData

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

    from .admission import Admission

__all__ = ["gate_hooks", "install_gate"]

_MARK = "__agents_reconcile_session__"


def install_gate(session: Admission, base: RunConfig | None = None) -> RunConfig:
    """Return ``base`` (or a new ``RunConfig``) with the gate composed into it.

    With reconciliation switched off, ``base`` comes back unchanged (``None`` becomes a
    plain ``RunConfig()``).
    """
    config = base if base is not None else RunConfig()
    if not session.enabled or getattr(config.call_model_input_filter, _MARK, None) is session:
        return config
    user_filter = config.call_model_input_filter
    user_callback = config.session_input_callback

    async def gate(data: CallModelData[Any]) -> ModelInputData:
        await session.admit(_mapping(data.context))
        if user_filter is None:
            return data.model_data
        result = user_filter(data)
        return await result if inspect.isawaitable(result) else result

    async def merge_retried_input(
        history: list[TResponseInputItem], new_input: list[TResponseInputItem]
    ) -> list[TResponseInputItem]:
        if session.is_retried_input(history, new_input):
            new_input = []
        if user_callback is None:
            return history + new_input
        result = user_callback(history, new_input)
        return await result if inspect.isawaitable(result) else result

    # Marked with its session, so installing the gate twice leaves one gate.
    setattr(gate, _MARK, session)
    return dataclasses.replace(
        config, call_model_input_filter=gate, session_input_callback=merge_retried_input
    )


def _mapping(context: Any) -> MutableMapping[str, Any] | None:
    return context if isinstance(context, MutableMapping) else None


class _GateHooks(RunHooks[Any]):
    """Runs the gate in ``on_llm_start``, then delegates every hook to ``base``."""

    def __init__(self, session: Admission, base: RunHooks[Any] | None) -> None:
        self._session = session
        self._base = base if base is not None else RunHooks()

    async def on_llm_start(self, context: Any, agent: Any, *args: Any, **kwargs: Any) -> None:
        await self._session.admit(_mapping(getattr(context, "context", None)))
        await self._base.on_llm_start(context, agent, *args, **kwargs)

    async def on_llm_end(self, *args: Any, **kwargs: Any) -> None:
        await self._base.on_llm_end(*args, **kwargs)

    async def on_agent_start(self, *args: Any, **kwargs: Any) -> None:
        await self._base.on_agent_start(*args, **kwargs)

    async def on_agent_end(self, *args: Any, **kwargs: Any) -> None:
        await self._base.on_agent_end(*args, **kwargs)

    async def on_handoff(self, *args: Any, **kwargs: Any) -> None:
        await self._base.on_handoff(*args, **kwargs)

    async def on_tool_start(self, context: Any, agent: Any, *args: Any, **kwargs: Any) -> None:
        # A resumed RunState runs its approved tools before any model call: check it here.
        await self._session.admit(_mapping(getattr(context, "context", None)))
        await self._base.on_tool_start(context, agent, *args, **kwargs)

    async def on_tool_end(self, *args: Any, **kwargs: Any) -> None:
        await self._base.on_tool_end(*args, **kwargs)


def gate_hooks(session: Admission, base: RunHooks[Any] | None = None) -> RunHooks[Any]:
    """``RunHooks`` whose ``on_llm_start`` runs the gate; ``base`` keeps receiving every hook."""
    if not session.enabled:
        return base if base is not None else RunHooks()
    return _GateHooks(session, base)
