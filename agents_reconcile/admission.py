"""Admission: what the gate asks of a session before every model call (and tool call, with
``hooks()``), and what it needs to keep a retried input from reaching the model twice.

``Gatekeeper`` answers for one ``ReconcilingSession``; the gate (``gate.py``) depends only on
the ``Admission`` protocol.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .config import ReconcileConfig
from .fingerprint import digest_items
from .journal_client import SESSION_WIDE, JournalClient
from .records import Outcome, Reason
from .runstate import CarriedState
from .settler import Settler
from .tail import TailMemory

if TYPE_CHECKING:
    from agents.memory.session_settings import SessionSettings

__all__ = ["Admission", "Gatekeeper"]


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

    def is_retried_input(self, history: Sequence[Any], new_input: Sequence[Any]) -> bool:
        """Whether ``new_input`` is the batch just settled and the history still ends with it."""
        ...


class Gatekeeper:
    """``Admission`` for one session."""

    def __init__(
        self,
        *,
        enabled: bool,
        config: ReconcileConfig,
        client: JournalClient,
        settler: Settler,
        carried: CarriedState,
        tail: TailMemory,
        ignore_ids: bool,
        session_settings: Callable[[], SessionSettings | None],
    ) -> None:
        self._session_settings = session_settings
        self._enabled = enabled
        self._config = config
        self._client = client
        self._settler = settler
        self._carried = carried
        self._tail = tail
        self._ignore_ids = ignore_ids

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def merges_retried_input(self) -> bool:
        return self._config.merge_retried_input

    def history_limit(self, run_settings: SessionSettings | None) -> int | None:
        from agents.memory.session_settings import SessionSettings

        settings = self._session_settings() or SessionSettings()
        if run_settings is not None:
            settings = settings.resolve(run_settings)
        return settings.limit

    async def admit(self, context: MutableMapping[str, Any] | None) -> None:
        """Settle pending intents, then refuse a run whose state is older than the session (a
        RunState checkpoint taken before later writes): it would act, and write, on a history
        it has not seen. Runs before every model call, and before every tool call when
        ``hooks()`` is used, so a stale checkpoint does not run a tool again."""
        await self._settler.settle_pending(context)
        if self._config.durability != "write_ahead":
            return
        accounted = await self._carried.accounted(context)
        if accounted is None:
            return
        counted = await self._client.count()
        if counted > accounted:
            await self._client.deny(
                None,
                Outcome.AMBIGUOUS,
                Reason.STALE_STATE,
                {"state_accounts_for": accounted, "journal_counted": counted},
                intent_id=SESSION_WIDE,
            )

    def is_retried_input(self, history: Sequence[Any], new_input: Sequence[Any]) -> bool:
        settled = self._tail.settled
        if settled is None or not self._config.merge_retried_input or not new_input:
            return False
        if len(new_input) != len(settled.batch) or len(history) < len(settled.batch):
            return False
        try:
            if digest_items(new_input, ignore_ids=self._ignore_ids) != settled.batch:
                return False
            tail = history[-len(settled.batch) :]
            return digest_items(tail, ignore_ids=self._ignore_ids) == settled.batch
        except TypeError:
            return False
