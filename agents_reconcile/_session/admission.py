"""Admission: what the gate asks of a session before every model call (and tool call, with
``hooks()``), and what it needs to keep a retried input from reaching the model twice.

``Gatekeeper`` answers for one ``ReconcilingSession``; the gate (``gate.py``) depends only on
the ``Admission`` protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from .._core.fingerprint import digest_items
from .._core.records import SESSION_WIDE, Outcome, Reason
from .settler import Settler
from .state import SessionState

if TYPE_CHECKING:
    from agents import RunConfig, RunHooks
    from agents.memory.session_settings import SessionSettings

__all__ = ["Admission", "Gatekeeper", "Gating"]


class Admission(Protocol):
    """The session as the gate sees it."""

    @property
    def enabled(self) -> bool: ...

    @property
    def merges_retried_input(self) -> bool:
        """Whether a retried input is kept from reaching the model (and the store) twice."""
        ...

    def history_limit(self, run_settings: SessionSettings | None) -> int | None:
        """The history limit a run with ``run_settings`` reads the session through (the
        session's own settings, overridden by the run's), as the SDK resolves it."""
        ...

    async def admit(self, context: MutableMapping[str, Any] | None) -> None:
        """Settle what is pending, then refuse a run that may not go on (raises)."""
        ...

    async def admit_tool(self, context: MutableMapping[str, Any] | None, tool_context: Any) -> None:
        """``admit``, then refuse an approved tool call whose output the history already
        holds: the checkpoint resumed was used before (raises)."""
        ...

    def final_output(self, context: MutableMapping[str, Any] | None) -> None:
        """The run reached its final output: its state remembers it until the save ends."""
        ...

    def is_retried_input(self, history: Sequence[Any], new_input: Sequence[Any]) -> bool:
        """Whether ``new_input`` is the batch just settled and the history still ends with it."""
        ...


# Items that carry a tool call's output, by ``type``.
_OUTPUT_TYPES: Final = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
    }
)


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def holds_output_of(history: Sequence[Any], call_id: str) -> bool:
    """Whether ``history`` holds the output of tool call ``call_id``."""
    return any(
        _field(item, "type") in _OUTPUT_TYPES and _field(item, "call_id") == call_id
        for item in history
    )


def _approved_call(tool_context: Any) -> str | None:
    """The id of the tool call ``tool_context`` is about to run, when it runs by an approval
    (a resumed state's approved call); else None."""
    call_id = getattr(tool_context, "tool_call_id", None)
    tool_name = getattr(tool_context, "tool_name", None)
    is_approved = getattr(tool_context, "is_tool_approved", None)
    if not (isinstance(call_id, str) and call_id and isinstance(tool_name, str)):
        return None
    if not callable(is_approved):
        return None
    try:
        approved = is_approved(tool_name, call_id)
    except Exception:
        # The SDK could not tell: checked as approved, which costs a read and nothing else.
        approved = True
    return call_id if approved else None


class Gating:
    """What both gates share: installing themselves, and the session's history limit."""

    session: Any

    def run_config(self, base: RunConfig | None) -> RunConfig:
        """``base`` (or a new ``RunConfig``) with this gate before every model call."""
        from .gate import install_gate

        return install_gate(self, base)  # type: ignore[arg-type]

    def hooks(self, base: RunHooks[Any] | None) -> RunHooks[Any]:
        """``RunHooks`` whose ``on_llm_start`` runs this gate, delegating to ``base``."""
        from .gate import gate_hooks

        return gate_hooks(self, base)  # type: ignore[arg-type]

    def history_limit(self, run_settings: SessionSettings | None) -> int | None:
        from agents.memory.session_settings import SessionSettings

        settings = self.session.session_settings or SessionSettings()
        if run_settings is not None:
            settings = settings.resolve(run_settings)
        limit: int | None = settings.limit
        return limit


class Gatekeeper(Gating):
    """``Admission`` for one session."""

    def __init__(self, state: SessionState, settler: Settler, session: Any) -> None:
        self.session: Any = session
        """The ``ReconcilingSession`` this gate is for (effect tools find it through the run's
        gate)."""
        self._enabled = state.config.active
        self._calls = state.inner
        self._config = state.config
        self._client = state.client
        self._settler = settler
        self._carried = state.carried
        self._tail = state.tail
        self._ignore_ids = state.ignore_ids
        self._scheme = state.scheme

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def merges_retried_input(self) -> bool:
        return self._config.merge_retried_input

    async def admit(self, context: MutableMapping[str, Any] | None) -> None:
        """Settle pending intents, then refuse a run whose state is older than the session (a
        RunState checkpoint taken before later writes): it would act, and write, on a history
        it has not seen. Runs before every model call, and before every tool call when
        ``hooks()`` is used, so a stale checkpoint does not run a tool again."""
        await self._settler.settle_pending(context)
        # What was settled while the SDK prepared the run (before its trace opened).
        self._client.trail.flush()
        finished = self._carried.finished(context)
        if finished is not None:
            # The state ended at its final output, whose save raised and is settled now: a
            # model call would store a second answer.
            await self._client.deny(
                None,
                Outcome.COMMITTED,
                Reason.RUN_FINISHED,
                {"final_output_write": finished},
                intent_id=finished,
            )
        seen_write_count = await self._carried.seen_write_count(context)
        if seen_write_count is None:
            return
        write_count = await self._client.write_count()
        if write_count > seen_write_count:
            await self._client.deny(
                None,
                Outcome.AMBIGUOUS,
                Reason.STALE_STATE,
                {"seen_write_count": seen_write_count, "journal_write_count": write_count},
                intent_id=SESSION_WIDE,
            )

    async def admit_tool(self, context: MutableMapping[str, Any] | None, tool_context: Any) -> None:
        """``admit``, then, for a call that runs by an approval, the evidence no client can
        edit: a stored history that already holds this call's output means the checkpoint was
        resumed before and the tool ran; running it again would repeat its effect. Refused
        whatever the run's context says (its seen write count may have been removed or edited)."""
        await self.admit(context)
        if not self._enabled:
            return
        call_id = _approved_call(tool_context)
        if call_id is None:
            return
        if holds_output_of(await self._calls.read(None, tool_context), call_id):
            await self._client.deny(
                None,
                Outcome.AMBIGUOUS,
                Reason.STALE_STATE,
                {"tool_call_id": call_id, "found": "the call's output is already stored"},
                intent_id=SESSION_WIDE,
            )

    def final_output(self, context: MutableMapping[str, Any] | None) -> None:
        if self._enabled:
            self._carried.final_reached(context)

    def is_retried_input(self, history: Sequence[Any], new_input: Sequence[Any]) -> bool:
        settled = self._tail.settled
        if settled is None or not self._config.merge_retried_input or not new_input:
            return False
        if len(new_input) != len(settled.batch) or len(history) < len(settled.batch):
            return False
        try:
            ignore_ids, scheme = self._ignore_ids, self._scheme
            if digest_items(new_input, ignore_ids=ignore_ids, scheme=scheme) != settled.batch:
                return False
            tail = history[-len(settled.batch) :]
            return digest_items(tail, ignore_ids=ignore_ids, scheme=scheme) == settled.batch
        except TypeError:
            return False
