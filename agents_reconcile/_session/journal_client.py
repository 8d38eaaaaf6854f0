"""One session's way to its intent journal: calls retried briefly while the journal is
unavailable, records it cannot trust turned into denials, and the denials themselves, recorded
in the trail (best effort) and raised.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeVar, cast

import orjson

from .. import errors
from .._backends.journal import (
    Capabilities,
    IntentJournal,
    IntentState,
    capabilities_of,
    require_journal,
)
from .._backends.opening import journal_path, open_journal
from .._backends.sealing_marks import mark_sealed
from .._backends.sqlite.journal import SQLiteJournal
from .._core.cancellation import resumed
from .._core.observability import Trail
from .._core.ownership import Owner, current_owner
from .._core.records import (
    SESSION_WIDE,
    UNREADABLE,
    Action,
    BackendIdentity,
    Decision,
    Outcome,
    PendingWrite,
    Reason,
)
from .._core.sealing import Keyring
from ..errors import (
    ConfigurationError,
    JournalError,
    JournalUnavailable,
    RecordError,
    UnsupportedRecordVersion,
)
from .config import ReconcileConfig

if TYPE_CHECKING:
    from .pruning import Pruner

__all__ = [
    "SESSION_WIDE",
    "UNREADABLE",
    "JournalClient",
    "lend_keys",
    "same_substance",
]

logger = logging.getLogger("agents_reconcile")


_T = TypeVar("_T")
_FIRST_PAUSE: Final = 0.05


class JournalClient:
    """The journal as one session uses it: opened on first use, retried, and denying."""

    def __init__(
        self,
        session_id: str,
        backend: BackendIdentity,
        config: ReconcileConfig,
        keyring: Keyring | None = None,
    ) -> None:
        self.session_id = session_id
        self.backend = backend
        self.config = config
        self.keyring = keyring if keyring is not None else Keyring()
        """The keys this session seals (the first) and opens its records with."""
        self._journal: IntentJournal | None = None
        self._capabilities: Capabilities | None = None
        self._owner_of: Owner | None = None
        self._owner: Owner | None = None
        self._pruner: Pruner | None = None
        self._sealing_marked = 0
        """How many of its keys the journal was marked with (``mark_sealed``)."""
        self.trail = Trail()
        """This session's trail in the run's traces and in logging records."""

    @property
    def owner(self) -> Owner:
        """This process as the owner of what this session holds, stamped with the session's
        lease (``lease_seconds``), so whoever judges the holder uses its own lease."""
        base = current_owner()  # re-derived after a fork
        if self._owner_of is not base:
            self._owner_of, self._owner = base, base.leased(self.config.lease_seconds)
        assert self._owner is not None
        return self._owner

    @property
    def journal(self) -> IntentJournal:
        """The intent journal, opened on first use."""
        if self._journal is None:
            opened = open_journal(self.config.journal)
            # A custom journal written for an earlier release is refused here, naming what to
            # add, rather than failing on a missing method in the middle of an append.
            require_journal(opened)
            self._journal = self._with_keys(opened)
            if self.config.active:
                from .pruning import pruner_for

                self._pruner = pruner_for(self._journal, self.config.retention)
        return self._journal

    @property
    def capabilities(self) -> Capabilities:
        """What the journal declares it offers beyond the protocol (read once, when needed)."""
        if self._capabilities is None:
            self._capabilities = capabilities_of(self.journal)
        return self._capabilities

    def _with_keys(self, journal: IntentJournal) -> IntentJournal:
        return lend_keys(journal, self.keyring)

    def for_reading(self, *, active: bool) -> IntentJournal | None:
        """The journal, without creating one when reconciliation is off (``active`` False):
        an existing SQLite journal is opened read-only, a missing one is None."""
        if active or self._journal is not None:
            return self.journal
        path = journal_path(self.config.journal)
        if path is None:
            return self.journal
        return self._with_keys(SQLiteJournal(path, read_only=True)) if path.exists() else None

    async def call(self, operation: Callable[..., Awaitable[_T]], *args: Any, **kwargs: Any) -> _T:
        """Run a journal operation, retrying it while the journal is unavailable (with jitter,
        so that a fleet does not retry in step); a record it cannot trust is a denial."""
        return await self._attempts(partial(operation, *args, **kwargs), None)

    def start(
        self, opening: Callable[[], Coroutine[Any, Any, _T]]
    ) -> tuple[_T, None] | tuple[None, Coroutine[Any, Any, _T]]:
        """Start ``call(opening)`` in the caller, for a journal that answers on the event loop
        (``starts_eagerly``): ``(answer, None)`` when it answered at once, without a layer of
        its own (no await, so no cancellation could come between); else ``(None, rest)``, the
        rest of the call (it suspended, or failed and is retried as ``call`` retries) for the
        caller to await as it awaits any call that may suspend."""
        call = opening()
        try:
            pending = call.send(None)
        except StopIteration as done:
            return cast(_T, done.value), None
        except (JournalUnavailable, RecordError) as failure:
            return None, self.after_failure(failure, opening)
        return None, self._rest_of(call, pending, opening)

    async def mark_sealed(self) -> None:
        """Mark the journal sealed under this session's payload keys before it writes a
        record sealed under one (``sealing_marks``): once per journal and key in a process;
        nothing for a session that does not seal."""
        if self.keyring and self._sealing_marked != len(self.keyring):
            await self.call(mark_sealed, self.journal, self.keyring)
            # Done for these keys: an append after it costs a comparison, no lookup.
            self._sealing_marked = len(self.keyring)

    def prune_when_due(self) -> None:
        """Start the journal's background prune when it is due (``pruning``): every append
        asks, before it opens its intent."""
        pruner = self._pruner
        if pruner is not None and time.monotonic() >= pruner.due:
            pruner.kick()

    async def _rest_of(
        self,
        call: Coroutine[Any, Any, _T],
        pending: Any,
        opening: Callable[[], Awaitable[_T]],
    ) -> _T:
        try:
            return await resumed(call, pending)
        except (JournalUnavailable, RecordError) as failure:
            return await self.after_failure(failure, opening)

    async def after_failure(
        self, failure: JournalUnavailable | RecordError, operation: Callable[[], Awaitable[_T]]
    ) -> _T:
        """The rest of ``call(operation)`` once its first attempt, made by the caller itself
        (an eager start), raised ``failure``: the same retries and denials, counted from it."""
        return await self._attempts(operation, failure)

    async def _attempts(
        self,
        operation: Callable[[], Awaitable[_T]],
        failure: JournalUnavailable | RecordError | None,
    ) -> _T:
        attempts = self.config.journal_retries
        attempt = 0
        while True:
            if failure is None:
                try:
                    return await operation()
                except (JournalUnavailable, RecordError) as exc:
                    failure = exc
            if isinstance(failure, RecordError):
                unsupported = isinstance(failure, UnsupportedRecordVersion)
                await self.deny(
                    None,
                    Outcome.AMBIGUOUS,
                    Reason.UNSUPPORTED_RECORD if unsupported else Reason.RECORD_UNTRUSTED,
                    {"journal_error": str(failure)},
                    intent_id=failure.intent_id or UNREADABLE,
                    binding=unsupported,
                    cause=failure,
                )
            if attempt >= attempts - 1:
                raise failure
            await asyncio.sleep(_FIRST_PAUSE * 2**attempt * random.uniform(0.5, 1.0))
            attempt += 1
            failure = None

    def decision(
        self,
        intent: PendingWrite | None,
        outcome: Outcome,
        reason: Reason,
        action: Action,
        evidence: Mapping[str, Any],
        *,
        intent_id: str = UNREADABLE,
    ) -> Decision:
        """A decision of this session about ``intent`` (or ``intent_id`` when there is none)."""
        return Decision(
            intent_id=intent.intent_id if intent is not None else intent_id,
            session_id=self.session_id,
            backend=self.backend,
            outcome=outcome,
            reason=reason,
            action=action,
            decided_at=time.time(),
            evidence=dict(evidence),
        )

    async def deny(
        self,
        intent: PendingWrite | None,
        outcome: Outcome,
        reason: Reason,
        evidence: Mapping[str, Any],
        action: Action = Action.DENIED,
        *,
        intent_id: str = UNREADABLE,
        binding: bool = False,
        cause: BaseException | None = None,
    ) -> NoReturn:
        """Record a denial in the trail (best effort) and raise it."""
        decision = self.decision(intent, outcome, reason, action, evidence, intent_id=intent_id)
        try:
            await self.note_once(decision)
        except (JournalError, RecordError):
            logger.warning(
                "could not record denial of intent %s", decision.intent_id, exc_info=True
            )
        self.trail.decided(decision)
        # The denials subclass the SDK's UserError: looked up here, so that reading a journal
        # (the operators' commands) never loads the SDK.
        denial = errors.BindingMismatch if binding else errors.ContinuationDenied
        if reason is Reason.RUNSTATE_EXPIRED:
            denial = errors.RunStateExpired
        elif reason is Reason.RUN_FINISHED:
            denial = errors.RunFinished
        raise denial(decision) from cause

    async def note_once(self, decision: Decision) -> None:
        """Store a denial in the trail, unless the newest decision about its intent says the
        very same thing (outcome, reason, action and evidence): a run retried against the same
        unresolved intent adds nothing new, so the trail keeps the first denial, counted
        (``Decision.repeats``, ``last_seen``)."""
        journal = self.journal
        newest = await journal.decisions(
            session_id=decision.session_id, intent_id=decision.intent_id, limit=1
        )
        if newest and same_substance(newest[0], decision):
            previous = newest[0]
            again = dataclasses.replace(
                previous, repeats=previous.repeats + 1, last_seen=decision.decided_at
            )
            if await journal.note_again(previous, again):
                return
            # Another decision came in meanwhile: this one is news again.
        await journal.note(decision)

    async def release(self, intent_id: str, *, fence: int | None = None) -> None:
        """Give up this process's claim on an intent (back to failed, for the next judge),
        only while it still holds it (under ``fence`` when given); a journal that cannot be
        reached leaves it to expire, with a warning."""
        me = self.owner
        try:
            await self.journal.transition(
                intent_id,
                state=IntentState.FAILED,
                owner=me,
                expect_state=IntentState.RECONCILING,
                expect_owner=me,
                expect_fence=fence,
            )
        except JournalError:
            logger.warning("could not release intent %s", intent_id, exc_info=True)

    async def write_count(self) -> int:
        """The journal's count of this session's writes."""
        return await self.call(self.journal.write_count, self.session_id, self.backend)


def same_substance(first: Decision, second: Decision) -> bool:
    """Whether two decisions say the same thing about the same intent (times aside)."""
    return (
        first.intent_id == second.intent_id
        and first.backend == second.backend
        and first.outcome is second.outcome
        and first.reason is second.reason
        and first.action is second.action
        and _plain(first.evidence) == _plain(second.evidence)
    )


def _plain(evidence: Mapping[str, Any]) -> Any:
    # As stored: a tuple read back from the journal is a list.
    return orjson.loads(orjson.dumps(dict(evidence), default=str))


def lend_keys(journal: IntentJournal, keyring: Keyring) -> IntentJournal:
    """``journal``, holding ``keyring``'s payload keys and signer too: a journal shared by
    several wrappers opens what any of them sealed, and checks what they sign. A journal
    without a keyring is refused when there are keys to lend."""
    if keyring or keyring.signer is not None:
        held = getattr(journal, "keyring", None)
        if not isinstance(held, Keyring):
            raise ConfigurationError(
                f"{type(journal).__qualname__} has no keyring, so it cannot open sealed "
                "or check signed records; this session seals its batches (payload_key or "
                "an EncryptedSession) or signs its records (signing_key)"
            )
        held.add(keyring)
        if keyring.signer is not None:
            held.add_signer(keyring.signer)
    return journal
