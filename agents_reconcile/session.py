"""``ReconcilingSession``: records each write's intent and settles uncertain ones before going on.

The rule lives in ``classify``; this module does the I/O around it: the journal, the inner
session's tail, the RunState copy of each intent, and the replay of a missing batch.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import logging
import random
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeVar

from agents.memory import OpenAIConversationsSession

from . import runstate
from .classify import Observation, Verdict, classify, observation_window
from .config import ReconcileConfig
from .crashpoints import CrashPoint, reached
from .errors import (
    BindingMismatch,
    ConfigurationError,
    ContinuationDenied,
    FingerprintError,
    IntentConflict,
    JournalError,
    JournalUnavailable,
    RecordError,
    RevisionConflict,
    UnsupportedRecordVersion,
    UnsupportedSession,
)
from .fingerprint import digest_items, journal_batch
from .identity import derive_identity, session_layers
from .journal import (
    IntentJournal,
    IntentState,
    JournalEntry,
    Opened,
    SQLiteJournal,
    journal_path,
    open_journal,
)
from .ownership import current_owner
from .records import (
    Action,
    BackendIdentity,
    Decision,
    Outcome,
    PendingWrite,
    Reason,
)
from .revision import (
    WRITES_CHECKED,
    RevisionedStore,
    WriteRecord,
    classify_revision,
    extended_write_id,
    is_revisioned,
)

if TYPE_CHECKING:
    from agents import RunConfig, RunHooks
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings
    from agents.run_context import RunContextWrapper

__all__ = ["CONTEXT_KEY", "ReconcilingSession"]

CONTEXT_KEY: Final = runstate.CONTEXT_KEY

logger = logging.getLogger("agents_reconcile")

_TAIL_KEEP: Final = 32
_POLL_SECONDS: Final = 0.02

# Intents this process has in flight or is reconciling right now, across all wrappers.
_BUSY: set[str] = set()
# Replays whose caller was cancelled, still running in the background, and their tasks.
_REPLAYING: set[str] = set()
_BACKGROUND: set[asyncio.Future[Any]] = set()
# One mutation lock per event loop, session and backend, shared by every wrapper of that
# session in this process (a web app builds one per request): they queue here instead of
# contending in the journal. Weak values: a lock lives while a wrapper of its session does.
_SESSION_LOCKS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock]
] = weakref.WeakKeyDictionary()
# Set while the inner session holds its own lock around a read through this wrapper.
_NO_RECONCILE: ContextVar[bool] = ContextVar("agents_reconcile_no_reconcile", default=False)
# SDK capability hooks forwarded when, and only when, the inner session has them.
_FORWARDED_AS_IS: Final = frozenset(
    {"_defer_compaction", "_get_deferred_compaction_response_id", "_ignore_ids_for_matching"}
)
_FORWARDED_GUARDED: Final = frozenset(
    {"run_compaction", "_get_items_with_generation", "_add_items_with_generation"}
)
_T = TypeVar("_T")


@dataclass
class _Tail:
    """Digests of the newest items as this wrapper last saw them; ``whole`` if that is all;
    ``writes``, the journal's write count for the session then (None: not to be kept)."""

    digests: list[str]
    whole: bool
    writes: int | None = None


@dataclass(frozen=True)
class _Settled:
    """The batch a settlement just vouched for, and the tail that ended with it."""

    batch: tuple[str, ...]
    tail: tuple[str, ...]


class ReconcilingSession:
    """Wraps any Agents SDK session so that no uncertain append is duplicated, lost, or
    continued on a history nobody can vouch for.

    Pass it as ``session=`` with ``run_config=session.run_config()``: the gate then checks
    pending intents before every model call, streamed or not, fresh or resumed.
    """

    def __init__(self, inner: Any, *, config: ReconcileConfig | None = None) -> None:
        if any(isinstance(layer, OpenAIConversationsSession) for layer in session_layers(inner)):
            raise UnsupportedSession(
                "OpenAIConversationsSession writes in chunks of 20 items and the SDK special-cases "
                "it by type, so its appends cannot be reconciled honestly; use a local session"
            )
        if isinstance(inner, ReconcilingSession):
            raise ConfigurationError("this session is already a ReconcilingSession")
        missing = [
            name
            for name in ("get_items", "add_items", "pop_item", "clear_session")
            if not callable(getattr(inner, name, None))
        ]
        if missing or not isinstance(getattr(inner, "session_id", None), str):
            raise UnsupportedSession(
                f"{type(inner).__name__} is not an Agents SDK Session "
                f"(missing: {', '.join(missing) or 'session_id'})"
            )
        self._inner = inner
        self.session_id: str = inner.session_id
        self.config = config or ReconcileConfig()
        self._active = self.config.active
        identity = self.config.backend_identity
        if isinstance(identity, str):
            identity = BackendIdentity.parse(identity)
        self.backend_identity: BackendIdentity = identity or derive_identity(inner)
        self._seen_key = runstate.seen_key(inner.session_id, self.backend_identity)
        self._ignore_ids = bool(getattr(inner, "_ignore_ids_for_matching", False))
        # A revisioned store is judged by its record of writes, not by fingerprints.
        self._store: RevisionedStore | None = inner if is_revisioned(inner) else None
        self._head: int | None = None
        self._settled_at: tuple[tuple[str, ...], int] | None = None
        self._journal: IntentJournal | None = None
        # The newest items' digests as last seen, and the journal's write count for the
        # session at that moment: the memory is trusted only while that count is unchanged.
        self._tail: _Tail | None = None
        self._trust_memory = self.config.durability == "write_ahead" and not self.config.verify_tail
        self._settled: _Settled | None = None
        self._unjournaled: dict[str, PendingWrite] = {}
        self._undiscarded: set[str] = set()
        # Counts this wrapper's writes, so a read that a write overtook is not remembered.
        self._writes = 0
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        # History limits that a fresh run's read of the history uses (the session's own, and
        # those of RunConfigs passed through run_config()): reads with them see what the run
        # builds on. The SDK's other reads (a resumed run's checks) use other limits.
        self._history_limits: set[int] = set()
        # Copies of the caller's own items for appends that failed here: a replay writes
        # exactly what the caller gave, not the journal's copy of it.
        self._in_hand: dict[str, list[Any]] = {}
        self._get_takes_limit = _accepts(inner.get_items, "limit")
        self._takes_wrapper = {
            name: _accepts(getattr(inner, name), "wrapper")
            for name in ("get_items", "add_items", "pop_item", "clear_session")
        }

    def __repr__(self) -> str:
        return f"ReconcilingSession({self._inner!r}, backend={self.backend_identity})"

    # -- what the SDK sees ---------------------------------------------------------------

    @property
    def inner(self) -> Any:
        """The wrapped session (writes made through it directly are not reconciled)."""
        return self._inner

    @property
    def session_settings(self) -> SessionSettings | None:
        return getattr(self._inner, "session_settings", None)

    @session_settings.setter
    def session_settings(self, value: SessionSettings | None) -> None:
        self._inner.session_settings = value

    @property
    def enabled(self) -> bool:
        """Whether this wrapper records and reconciles (config flag and environment)."""
        return self._active

    @property
    def journal(self) -> IntentJournal:
        """The intent journal, opened on first use."""
        if self._journal is None:
            self._journal = open_journal(self.config.journal)
        return self._journal

    def __getattr__(self, name: str) -> Any:
        # Only the SDK's capability hooks, and only those the inner session really has:
        # the SDK decides what a session can do by looking for them.
        if name in _FORWARDED_AS_IS or name in _FORWARDED_GUARDED:
            target = getattr(self.__dict__.get("_inner"), name, None)
            if target is not None:
                if name in _FORWARDED_AS_IS:
                    return target
                return _GUARDS[name](self, target)
        raise AttributeError(f"{type(self).__name__!s} object has no attribute {name!r}")

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The inner history, after settling pending intents (raises ``ContinuationDenied``)."""
        context = runstate.context_of(wrapper)
        if self._active and not _NO_RECONCILE.get():
            await self._settle_pending(context, wrapper)
        own_writes = self._writes
        counted = await self._counted_writes() if self._active else None
        # A run that reads the history as a fresh run does has seen every write so far.
        marks = context is not None and self._marks_reads(limit)
        if marks and counted is None and runstate.seen(context, self._seen_key) is not None:
            counted = await self._journal_call(
                self.journal.writes, self.session_id, self.backend_identity
            )
        if self._store is not None and self._active and self._reads_whole(limit):
            # A fresh run's read: what it sees is the head its next append builds on.
            self._head = await self._store.head()
        items = await self._inner_get(limit, wrapper)
        if counted is not None and self._writes == own_writes:
            # Only a read that no write of ours overtook may refresh the remembered tail.
            if self._trust_memory:
                self._observe_read(items, limit, counted)
            if marks:
                assert context is not None
                runstate.mark_seen(context, self._seen_key, counted)
        return items

    def _marks_reads(self, limit: int | None) -> bool:
        """Whether a read with this limit is a fresh run's read of the history (all of it, or
        the session's own limit); the SDK reads a resumed run's tail with other limits."""
        if not self._active or self.config.durability != "write_ahead":
            return False
        return self._reads_whole(limit)

    def _reads_whole(self, limit: int | None) -> bool:
        """Whether a read with this limit is how a fresh run reads the history it builds on:
        all of it, the session's own limit, or a limit of a RunConfig given to run_config()."""
        if limit is None or limit in self._history_limits:
            return True
        settings = self.session_settings
        return settings is not None and settings.limit == limit

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Append ``items`` under a recorded intent; a failure keeps the intent pending and
        re-raises the backend's own exception with a note naming it."""
        if not self._active:
            await self._inner_add(items, wrapper)
            return
        # What the journal will hold, refused now if it could not hold it exactly: a replay
        # must write what the caller gave, or nothing.
        batch, digests = journal_batch(items, ignore_ids=self._ignore_ids)
        if not items:
            await self._inner_add(items, wrapper)
            return
        context = runstate.context_of(wrapper)
        progress = _Progress(self.config.in_flight_wait)
        try:
            if self._store is not None:
                await self._add_revisioned(
                    self._store, items, batch, digests, context, wrapper, progress
                )
            else:
                await self._add_fingerprinted(items, batch, digests, context, wrapper, progress)
        except BaseException as exc:
            if not progress.started and not isinstance(exc, ContinuationDenied):
                # Raised while settling an earlier write (its replay failed, say): this
                # caller's own batch never started, so its outcome is not in doubt.
                exc.add_note(
                    f"agents-reconcile: this append did not start (nothing of its batch was "
                    f"written to session {self.session_id!r}): settling an earlier write failed"
                )
            raise

    async def _add_fingerprinted(
        self,
        items: list[TResponseInputItem],
        batch: tuple[Any, ...],
        digests: tuple[str, ...],
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
        progress: _Progress,
    ) -> None:
        """Append on a history judged by fingerprints."""
        write_ahead = self.config.durability == "write_ahead"
        # Under write_ahead the journal checks for pending intents in the same transaction
        # that records the new one, so settling first would only repeat that query.
        async with self._mutation(context, wrapper, settle=not write_ahead):
            opened: Opened | None = None
            # What this run has seen of the session (a RunState carries it): checked against
            # the journal's count once the intent is open, so a stale state never writes.
            accounted = await self._accounted_writes(context) if write_ahead else None
            while True:
                if write_ahead and self._has_local_work(context):
                    await self._settle_pending(context, wrapper, locked=True)
                view = await self._tail_view(len(items) + 1, wrapper)
                if self._is_retried_batch(digests, view):
                    logger.info(
                        "session %s: batch equal to the one just settled was not appended again",
                        self.session_id,
                    )
                    self._settled = None
                    if context is not None and write_ahead:
                        # The store ends exactly as this run's own write left it: in step again.
                        writes = await self._journal_call(
                            self.journal.writes, self.session_id, self.backend_identity
                        )
                        runstate.mark_seen(context, self._seen_key, writes)
                    return
                intent = self._new_intent(batch, digests, view)
                reached(CrashPoint.BEFORE_INTENT_RECORDED)
                # In flight from the moment it can be seen in the journal: another wrapper in
                # this process must never take it for a failed write.
                _BUSY.add(intent.intent_id)
                if not write_ahead:
                    break
                opened = await self._open_intent(
                    intent,
                    context,
                    wrapper,
                    accounted=accounted,
                    expect_writes=view.writes if self._trust_memory else None,
                )
                if opened is not None:
                    break
                await self._back_off(progress)
            self._settled = None
            progress.started = True
            await self._append(intent, items, wrapper, context, recorded=write_ahead)
            if self._tail is not None and opened is not None:
                self._extend_tail(intent.batch_digests, writes=opened.writes + 1)

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Remove the newest item, after settling pending intents."""
        if not self._active:
            popped: TResponseInputItem | None = await self._call(
                self._inner.pop_item, "pop_item", wrapper
            )
            return popped
        async with self._mutation(runstate.context_of(wrapper), wrapper):
            await self._count_foreign_write(runstate.context_of(wrapper))
            head = self._head
            result: TResponseInputItem | None = await self._call(
                self._inner.pop_item, "pop_item", wrapper
            )
            await self._follow_own_removal(head, wrote=result is not None)
            return result

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Clear the history, after settling pending intents."""
        if not self._active:
            await self._call(self._inner.clear_session, "clear_session", wrapper)
            return
        async with self._mutation(runstate.context_of(wrapper), wrapper):
            await self._count_foreign_write(runstate.context_of(wrapper))
            head = self._head
            await self._call(self._inner.clear_session, "clear_session", wrapper)
            await self._follow_own_removal(head, wrote=True)

    async def _follow_own_removal(self, head: int | None, *, wrote: bool) -> None:
        """Move the head this wrapper builds on past its own pop or clear (revisioned stores).

        The store records the removal as a write (of an anonymous writer), so the next
        append's compare-and-swap would otherwise meet it and take it for someone else's.
        The head moves only when it moved by exactly this removal's own write: then nobody
        else wrote in between. Otherwise the known head stays, and the next append meets
        the others' writes and is judged by them."""
        if self._store is None or head is None:
            return
        now = await self._store.head()
        if now == head + int(wrote) or now == head:
            self._head = now

    # -- public controls ------------------------------------------------------------------

    async def pending(self) -> list[PendingWrite]:
        """Unresolved intents the journal holds for this session and backend (no reconciling)."""
        journal = self._journal_for_reading()
        entries = (
            [] if journal is None else await journal.pending(self.session_id, self.backend_identity)
        )
        found = [entry.intent for entry in entries]
        known = {intent.intent_id for intent in found}
        found.extend(i for i in self._unjournaled.values() if i.intent_id not in known)
        return found

    async def reconcile(self, context: Any = None) -> list[Decision]:
        """Classify and settle pending intents now (what the gate does before a model call).

        Pass the run's mapping ``context`` to include the intents a RunState carries.
        Raises ``ContinuationDenied`` when one cannot be vouched for.
        """
        if not self._active:
            return []
        return await self._settle_pending(context if isinstance(context, MutableMapping) else None)

    async def _admit(self, context: MutableMapping[str, Any] | None) -> None:
        """The gate: settle pending intents, then refuse a run whose state is older than the
        session (a RunState checkpoint taken before later writes): it would act, and write,
        on a history it has not seen. Runs before every model call, and before every tool
        call when ``hooks()`` is used, so a stale checkpoint does not run a tool again."""
        await self._settle_pending(context)
        if self.config.durability != "write_ahead":
            return
        accounted = await self._accounted_writes(context)
        if accounted is None:
            return
        counted = await self._journal_call(
            self.journal.writes, self.session_id, self.backend_identity
        )
        if counted > accounted:
            await self._refuse(
                None,
                Outcome.AMBIGUOUS,
                Reason.STALE_STATE,
                {"state_accounts_for": accounted, "journal_counted": counted},
                intent_id="none",
            )

    async def decisions(self, limit: int = 100) -> list[Decision]:
        """This session's recorded decisions, newest first."""
        journal = self._journal_for_reading()
        if journal is None:
            return []
        return await journal.decisions(session_id=self.session_id, limit=limit)

    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """``base`` (or a new ``RunConfig``) with the gate installed before every model call."""
        from .gate import install_gate

        settings = base.session_settings if base is not None else None
        if settings is not None and settings.limit is not None:
            # A fresh run of this config reads the history through this limit.
            self._history_limits.add(settings.limit)
        return install_gate(self, base)

    def hooks(self, base: RunHooks[Any] | None = None) -> RunHooks[Any]:
        """``RunHooks`` whose ``on_llm_start`` runs the gate, delegating everything to ``base``.

        Hooks cannot shape the model's input: use ``run_config()`` as well to keep a retried
        input from reaching the model twice.
        """
        from .gate import gate_hooks

        return gate_hooks(self, base)

    def _journal_for_reading(self) -> IntentJournal | None:
        """The journal, without creating one when reconciliation is off."""
        if self._active or self._journal is not None:
            return self.journal
        path = journal_path(self.config.journal)
        if path is None:
            return self.journal
        return SQLiteJournal(path, read_only=True) if path.exists() else None

    # -- the write path -------------------------------------------------------------------

    def _has_local_work(self, context: MutableMapping[str, Any] | None) -> bool:
        return bool(self._unjournaled or self._undiscarded or runstate.has_pending(context))

    async def _accounted_writes(self, context: MutableMapping[str, Any] | None) -> int | None:
        """The session's write count this run can account for: what it last saw, plus one
        settlement for each intent it still carries. None when the context has no mark.

        A journal that counted fewer writes than that is another journal than the one the
        state last wrote through (a RunState copy may be resumed anywhere): counts say
        nothing then, and the carried intents alone are checked."""
        mark = runstate.seen(context, self._seen_key)
        if mark is None:
            return None
        if isinstance(mark, runstate.Refusal):
            await self._refuse_binding(mark)
        carried = runstate.carried_entries(context)
        if isinstance(carried, runstate.Refusal):
            await self._refuse_binding(carried)
        mine = sum(
            isinstance(
                runstate.check_carried(
                    raw, session_id=self.session_id, backend=self.backend_identity
                ),
                PendingWrite,
            )
            for raw in carried
        )
        return mark + mine

    def _new_intent(
        self, batch: tuple[Any, ...], digests: tuple[str, ...], view: _Tail
    ) -> PendingWrite:
        needed = len(batch) + 1
        before = tuple(view.digests[-needed:])
        whole = view.whole and len(view.digests) <= needed
        return PendingWrite(
            intent_id=uuid.uuid4().hex,
            session_id=self.session_id,
            backend=self.backend_identity,
            batch=batch,
            batch_digests=digests,
            before_digests=before,
            before_is_whole=whole,
            created_at=time.time(),
            persisted_count=len(before) if whole else None,
            ignore_ids=self._ignore_ids,
        )

    async def _tail_view(self, needed: int, wrapper: RunContextWrapper[Any] | None) -> _Tail:
        """Digests of at least ``needed`` newest items (more after a settlement, to recognise a
        retried batch): from memory while the journal's write count vouches for it, else read."""
        settled = self._settled
        want = max(needed, len(settled.tail) if settled is not None else 0)
        known = self._tail
        # Right after a settlement the retried-batch check decides without the journal's
        # verdict, so it must see the store itself.
        if (
            settled is None
            and known is not None
            and known.writes is not None
            and (known.whole or len(known.digests) >= want)
        ):
            return known
        counted = await self._counted_writes()
        items = await self._inner_get(want, wrapper)
        try:
            digests = digest_items(items[-want:], ignore_ids=self._ignore_ids)
        except FingerprintError as exc:
            raise FingerprintError(
                f"an item already stored in session {self.session_id!r} cannot be "
                f"fingerprinted: {exc}",
                index=exc.index,
            ) from exc
        view = _Tail(list(digests), whole=len(items) < want, writes=counted)
        if counted is not None:
            self._tail = view
        return view

    async def _counted_writes(self) -> int | None:
        """The journal's write count for this session, when memory may be trusted at all."""
        if not self._trust_memory:
            return None
        return await self._journal_call(self.journal.writes, self.session_id, self.backend_identity)

    async def _count_foreign_write(self, context: MutableMapping[str, Any] | None) -> None:
        """A pop or a clear: count it, so that every wrapper's memory of the tail expires."""
        self._forget_tail()
        writes = await self._journal_call(
            self.journal.count_write, self.session_id, self.backend_identity
        )
        if context is not None:
            runstate.mark_seen(context, self._seen_key, writes)

    async def _append(
        self,
        intent: PendingWrite,
        items: list[TResponseInputItem],
        wrapper: RunContextWrapper[Any] | None,
        context: MutableMapping[str, Any] | None,
        *,
        recorded: bool,
        store: RevisionedStore | None = None,
    ) -> int | None:
        new_head: int | None = None
        try:
            reached(CrashPoint.AFTER_INTENT_RECORDED)
            if store is None:
                await self._inner_add(items, wrapper)
            else:
                assert intent.expected_revision is not None
                new_head = await store.append_if(
                    items,
                    expected=intent.expected_revision,
                    write_id=intent.intent_id,
                    writer=str(current_owner()),
                )
        except RevisionConflict:
            # Proven not written: the caller takes the intent back and decides.
            raise
        except BaseException as exc:
            state = (
                IntentState.CANCELLED
                if isinstance(exc, asyncio.CancelledError)
                else IntentState.FAILED
            )
            self._forget_tail()
            self._keep_in_hand(intent, items)
            note = await _despite_cancellation(
                self._remember_failure(intent, state, context, recorded=recorded)
            )
            exc.add_note(note)
            raise
        finally:
            _BUSY.discard(intent.intent_id)
        reached(CrashPoint.BEFORE_INTENT_CLEARED)
        if recorded:
            try:
                await self.journal.discard(intent.intent_id)
            except JournalError:
                # The append is acknowledged; retried before this wrapper's next operation.
                self._undiscarded.add(intent.intent_id)
                logger.warning(
                    "session %s: acknowledged intent %s could not be cleared from the journal",
                    self.session_id,
                    intent.intent_id,
                    exc_info=True,
                )
        return new_head

    async def _open_intent(
        self,
        intent: PendingWrite,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
        *,
        accounted: int | None,
        expect_writes: int | None,
    ) -> Opened | None:
        """Record ``intent`` write-ahead. None: it was not recorded (another intent was pending
        and is settled now, or the session was written after the tail it was built on): build
        it again. A run whose state is older than the session is refused."""
        try:
            # The journal answers a retry of this very call (a lost reply) with the intent
            # it already recorded, so a retried opening never meets itself as "pending".
            opened = await self._journal_call(
                self.journal.open_intent,
                intent,
                state=IntentState.IN_FLIGHT,
                owner=current_owner(),
                expect_writes=expect_writes,
            )
            if not opened.recorded:
                _BUSY.discard(intent.intent_id)
                if opened.blocking:
                    await self._settle_pending(context, wrapper, locked=True)
                    return None
                if accounted is not None and opened.writes > accounted:
                    # Counts only grow: however often it is built again, it stays stale.
                    await self._refuse_stale(intent, accounted, opened.writes)
                # Another writer wrote after the tail this intent was built on; nothing was
                # recorded or counted, so retrying cannot hold anyone else back.
                self._forget_tail()
                return None
            if accounted is not None and opened.writes > accounted:
                await self._journal_call(self.journal.discard, intent.intent_id)
                _BUSY.discard(intent.intent_id)
                await self._refuse_stale(intent, accounted, opened.writes)
            if context is not None:
                runstate.mark_seen(context, self._seen_key, opened.writes + 1)
        except BaseException:
            _BUSY.discard(intent.intent_id)
            raise
        return opened

    async def _refuse_stale(self, intent: PendingWrite, accounted: int, counted: int) -> NoReturn:
        await self._refuse(
            intent,
            Outcome.AMBIGUOUS,
            Reason.STALE_STATE,
            {"state_accounts_for": accounted, "journal_counted": counted},
        )

    async def _back_off(self, progress: _Progress) -> None:
        """Wait a little before building an intent again (jittered, so that writers in other
        processes do not retry in step), or deny once the wait bound is spent."""
        progress.count += 1
        if progress.spent:
            await self._refuse(
                None,
                Outcome.AMBIGUOUS,
                Reason.SESSION_BUSY,
                {"attempts": progress.count, "waited_seconds": progress.bound},
                intent_id="none",
            )
        await asyncio.sleep(progress.pause())

    # -- revisioned stores ---------------------------------------------------------------

    async def _add_revisioned(
        self,
        store: RevisionedStore,
        items: list[TResponseInputItem],
        batch: tuple[Any, ...],
        digests: tuple[str, ...],
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
        progress: _Progress,
    ) -> None:
        """Append with ``append_if`` against the head this wrapper knows: the store itself
        refuses the write if anyone wrote since, so no tail is read and nothing is guessed."""
        write_ahead = self.config.durability == "write_ahead"
        async with self._mutation(context, wrapper, settle=not write_ahead):
            accounted = await self._accounted_writes(context) if write_ahead else None
            first = True
            while True:
                if not first:
                    await self._back_off(progress)
                first = False
                if write_ahead and self._has_local_work(context):
                    await self._settle_pending(context, wrapper, locked=True)
                if self._head is None:
                    self._head = await store.head()
                settled = self._settled_at
                self._settled_at = None
                if (
                    settled is not None
                    and self.config.merge_retried_input
                    and settled == (digests, self._head)
                ):
                    logger.info(
                        "session %s: batch equal to the one just settled was not appended again",
                        self.session_id,
                    )
                    return
                intent = self._new_intent(batch, digests, _Tail([], whole=False, writes=None))
                intent = dataclasses.replace(
                    intent, before_digests=(), persisted_count=None, expected_revision=self._head
                )
                reached(CrashPoint.BEFORE_INTENT_RECORDED)
                _BUSY.add(intent.intent_id)
                if write_ahead:
                    opened = await self._open_intent(
                        intent, context, wrapper, accounted=accounted, expect_writes=None
                    )
                    if opened is None:
                        continue
                progress.started = True
                try:
                    new_head = await self._append(
                        intent, items, wrapper, context, recorded=write_ahead, store=store
                    )
                except RevisionConflict as conflict:
                    # The store refused: either the head moved (nothing written) or the write
                    # id is already there (a driver that retried after a lost reply). The
                    # record of writes says which, before the intent is let go.
                    try:
                        verdict = await self._judge_revision(store, intent)
                    except BaseException as exc:
                        self._head = None
                        note = await _despite_cancellation(
                            self._remember_failure(
                                intent, IntentState.FAILED, context, recorded=write_ahead
                            )
                        )
                        exc.add_note(note)
                        raise
                    if write_ahead:
                        await self._journal_call(self.journal.discard, intent.intent_id)
                    self._head = conflict.actual
                    if verdict.outcome is Outcome.COMMITTED:
                        self._head = None
                        return
                    if verdict.outcome is Outcome.EXTENDED and self.config.on_extended == "append":
                        progress.started = False  # proven not written: build it again
                        continue
                    await self._refuse(intent, verdict.outcome, verdict.reason, verdict.evidence)
                except BaseException:
                    self._head = None
                    raise
                self._head = new_head
                return

    async def _judge_revision(self, store: RevisionedStore, intent: PendingWrite) -> Verdict:
        """What the store's record of writes says about ``intent`` (the head is read before
        the writes after it, which the rule relies on)."""
        assert intent.expected_revision is not None
        found = await store.find_write(intent.intent_id)
        found_extended = await store.find_write(extended_write_id(intent.intent_id))
        head = await store.head()
        after: list[WriteRecord] = []
        if found is None and found_extended is None and head > intent.expected_revision:
            after = await store.writes_after(intent.expected_revision, limit=WRITES_CHECKED)
        return classify_revision(
            expected=intent.expected_revision,
            write_id=intent.intent_id,
            head=head,
            found=found,
            after=after,
            found_extended=found_extended,
        )

    async def _decide_revisioned(
        self,
        store: RevisionedStore,
        intent: PendingWrite,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
    ) -> Decision:
        for _ in range(3):
            verdict = await self._judge_revision(store, intent)
            reached(CrashPoint.DURING_RECONCILE_READ)
            outcome, evidence = verdict.outcome, verdict.evidence
            if outcome is Outcome.COMMITTED:
                reached(CrashPoint.BEFORE_SETTLE)
                action = Action.SETTLED
            elif outcome is Outcome.UNCHANGED and self.config.on_unchanged == "fail":
                await self._refuse(
                    intent, outcome, Reason.OPERATOR_REQUIRED, evidence, Action.LEFT_PENDING
                )
            elif outcome is Outcome.UNCHANGED or (
                outcome is Outcome.EXTENDED and self.config.on_extended == "append"
            ):
                reached(CrashPoint.BEFORE_REPLAY)
                write_id = intent.intent_id
                if outcome is Outcome.EXTENDED:
                    # It lands after the others, not where the write expected: an id of its own.
                    write_id = extended_write_id(write_id)
                try:
                    self._head = await self._replay(
                        intent,
                        wrapper,
                        store=store,
                        expected=int(evidence["head"]),
                        write_id=write_id,
                    )
                except RevisionConflict:
                    continue  # someone wrote meanwhile: judge again
                reached(CrashPoint.AFTER_REPLAY)
                action = Action.REPLAYED
            else:
                await self._refuse(intent, outcome, verdict.reason, evidence)
            decision = self._decision(intent, outcome, verdict.reason, action, evidence)
            await self._journal_call(self.journal.settle, decision, owner=current_owner())
            self._after_settlement(intent, context)
            head = await store.head() if action is Action.SETTLED else self._head
            self._settled_at = (intent.batch_digests, head) if head is not None else None
            return decision
        await self._refuse(
            intent,
            Outcome.AMBIGUOUS,
            Reason.SESSION_BUSY,
            {"expected_revision": intent.expected_revision, "problem": "head kept moving"},
            Action.LEFT_PENDING,
        )

    async def _remember_failure(
        self,
        intent: PendingWrite,
        state: IntentState,
        context: MutableMapping[str, Any] | None,
        *,
        recorded: bool,
    ) -> str:
        if context is not None:
            runstate.put(context, intent)
        places = ["the RunState context"] if context is not None else []
        me = current_owner()
        try:
            if recorded:
                moved = await self.journal.transition(
                    intent.intent_id,
                    state=state,
                    owner=me,
                    expect_state=IntentState.IN_FLIGHT,
                    expect_owner=me,
                )
                places.insert(0, "the journal" if moved else "the journal (claimed by another)")
            else:
                await self.journal.record(intent, state=state, owner=me)
                places.insert(0, "the journal")
        except JournalError as journal_error:
            # Kept in memory too: detach it from the caller's (mutable) items first.
            self._unjournaled[intent.intent_id] = PendingWrite.decode(intent.encode())
            places.append(f"this session object (the journal failed: {journal_error})")
        return (
            f"agents-reconcile: the outcome of this append is unknown; intent "
            f"{intent.intent_id} for session {self.session_id!r} is pending in "
            f"{' and '.join(places)} and will be reconciled before the session is used again"
        )

    def _keep_in_hand(self, intent: PendingWrite, items: list[Any]) -> None:
        """Keep a copy of the caller's own items for a replay by this wrapper."""
        try:
            self._in_hand[intent.intent_id] = copy.deepcopy(items)
        except Exception:
            # An item that refuses to be copied: the journal's copy, equal as JSON, serves.
            logger.debug("items of intent %s could not be copied", intent.intent_id)

    def _replay_batch(self, intent: PendingWrite) -> list[Any]:
        """What a replay writes: the caller's own items while this wrapper holds them (the
        journal's copy is equal as JSON, but the caller's are what the caller gave)."""
        kept = self._in_hand.get(intent.intent_id)
        if kept is not None:
            try:
                digests = digest_items(kept, ignore_ids=intent.ignore_ids, scheme=intent.scheme)
            except FingerprintError:
                digests = ()
            if digests == intent.batch_digests:
                return copy.deepcopy(kept)
        return copy.deepcopy(list(intent.batch))

    def _observe_read(self, items: Sequence[Any], limit: int | None, writes: int) -> None:
        try:
            digests = list(digest_items(items[-_TAIL_KEEP:], ignore_ids=self._ignore_ids))
        except FingerprintError:
            self._tail = None
            return
        complete = limit is None or limit <= 0 or len(items) < limit
        known = self._tail
        if (
            not complete
            and known is not None
            and known.writes == writes
            and len(known.digests) > len(digests)
            and known.digests[len(known.digests) - len(digests) :] == digests
        ):
            # A short read that agrees with what is known says nothing new: keep the longer view.
            return
        self._tail = _Tail(digests, complete and len(items) <= _TAIL_KEEP, writes)

    def _extend_tail(self, digests: Sequence[str], *, writes: int) -> None:
        assert self._tail is not None
        merged = self._tail.digests + list(digests)
        whole = self._tail.whole and len(merged) <= _TAIL_KEEP
        self._tail = _Tail(merged[-_TAIL_KEEP:], whole, writes)

    def _forget_tail(self) -> None:
        self._tail = None
        self._settled = None

    def _is_retried_batch(self, digests: tuple[str, ...], view: _Tail) -> bool:
        settled = self._settled
        if settled is None or not self.config.merge_retried_input or settled.batch != digests:
            return False
        return tuple(view.digests[-len(settled.tail) :]) == settled.tail

    # -- settling ----------------------------------------------------------------------

    @contextmanager
    def _no_reconcile(self) -> Iterator[None]:
        token = _NO_RECONCILE.set(True)
        try:
            yield
        finally:
            _NO_RECONCILE.reset(token)

    def _loop_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            shared = _SESSION_LOCKS.get(loop)
            if shared is None:
                shared = _SESSION_LOCKS[loop] = weakref.WeakValueDictionary()
            key = (self.session_id, str(self.backend_identity))
            lock = shared.get(key)
            if lock is None:
                lock = shared[key] = asyncio.Lock()
            self._locks[loop] = lock
        return lock

    def _mutation(
        self,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
        *,
        settle: bool = True,
    ) -> _Mutation:
        return _Mutation(self, context, wrapper, settle=settle)

    async def _settle_pending(
        self,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None = None,
        *,
        locked: bool = False,
    ) -> list[Decision]:
        """Settle every pending intent of this session, oldest first; deny on the first that
        cannot be vouched for."""
        await self._retry_discards()
        await self._adopt_context_copies(context)
        entries = await self._journal_call(
            self.journal.pending, self.session_id, self.backend_identity
        )
        if not entries and not self._unjournaled:
            return []
        if not locked:
            async with self._mutation(context, wrapper, settle=False):
                return await self._settle_pending(context, wrapper, locked=True)
        decisions: list[Decision] = []
        for entry in entries:
            try:
                decisions.append(await self._settle_entry(entry, context, wrapper))
            except _AlreadySettled:
                continue
        for intent in list(self._unjournaled.values()):
            decision = await self._settle_unjournaled(intent, context, wrapper)
            if decision is not None:
                decisions.append(decision)
        return decisions

    async def _retry_discards(self) -> None:
        for intent_id in list(self._undiscarded):
            try:
                await self.journal.discard(intent_id)
            except JournalError:
                return
            self._undiscarded.discard(intent_id)

    async def _settle_unjournaled(
        self,
        intent: PendingWrite,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
    ) -> Decision | None:
        """Settle an intent only this object remembers (the journal failed when it failed)."""
        if await self._journal_call(self.journal.is_settled, intent.intent_id):
            del self._unjournaled[intent.intent_id]
            return None
        try:
            await self._journal_call(
                self.journal.record, intent, state=IntentState.FAILED, owner=current_owner()
            )
        except IntentConflict as exc:
            if await self._journal_call(self.journal.is_settled, intent.intent_id):
                del self._unjournaled[intent.intent_id]
                return None
            await self._refuse(
                intent,
                Outcome.AMBIGUOUS,
                Reason.COPIES_DISAGREE,
                {"error": str(exc)},
                binding=True,
                cause=exc,
            )
        del self._unjournaled[intent.intent_id]
        entry = await self._journal_call(self.journal.get, intent.intent_id)
        if entry is None:
            return None
        try:
            return await self._settle_entry(entry, context, wrapper)
        except _AlreadySettled:
            return None

    async def _settle_entry(
        self,
        entry: JournalEntry,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
    ) -> Decision:
        intent = entry.intent
        await self._claim(entry)
        _BUSY.add(intent.intent_id)
        try:
            return await self._decide(intent, context, wrapper)
        except BaseException:
            if intent.intent_id in _REPLAYING:
                # A cancelled replay goes on in the background and keeps the claim; it
                # releases both when it ends (see _replay).
                raise
            await _despite_cancellation(self._release(intent))
            raise
        finally:
            if intent.intent_id not in _REPLAYING:
                _BUSY.discard(intent.intent_id)

    async def _claim(self, entry: JournalEntry) -> None:
        """Take ownership of an intent, waiting (bounded) for a live owner to finish."""
        deadline = time.monotonic() + self.config.in_flight_wait
        me = current_owner()
        while True:
            if _blocked(entry, self.config.lease_seconds):
                if time.monotonic() >= deadline:
                    await self._refuse(
                        entry.intent,
                        Outcome.AMBIGUOUS,
                        Reason.IN_FLIGHT_ELSEWHERE,
                        {"state": entry.state.value, "owner": str(entry.owner)},
                    )
                await asyncio.sleep(_POLL_SECONDS)
            elif await self._journal_call(
                self.journal.transition,
                entry.intent.intent_id,
                state=IntentState.RECONCILING,
                owner=me,
                expect_state=entry.state,
                expect_owner=entry.owner,
            ):
                return
            current = await self._journal_call(self.journal.get, entry.intent.intent_id)
            if current is None:
                raise _AlreadySettled(entry.intent.intent_id)
            entry = current

    async def _release(self, intent: PendingWrite) -> None:
        me = current_owner()
        try:
            await self.journal.transition(
                intent.intent_id,
                state=IntentState.FAILED,
                owner=me,
                expect_state=IntentState.RECONCILING,
                expect_owner=me,
            )
        except JournalError:
            logger.warning("could not release intent %s", intent.intent_id, exc_info=True)

    async def _decide(
        self,
        intent: PendingWrite,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
    ) -> Decision:
        if intent.expected_revision is not None:
            if self._store is None:
                await self._refuse(
                    intent,
                    Outcome.AMBIGUOUS,
                    Reason.BACKEND_MISMATCH,
                    {"problem": "a revisioned intent, and the session is not revisioned"},
                    binding=True,
                )
            return await self._decide_revisioned(self._store, intent, context, wrapper)
        window = observation_window(intent)
        with self._no_reconcile():
            items = await self._inner_get(window, wrapper)
        tail = digest_items(items[-window:], ignore_ids=intent.ignore_ids, scheme=intent.scheme)
        reached(CrashPoint.DURING_RECONCILE_READ)
        verdict = classify(intent, Observation(tail))
        evidence = verdict.evidence
        if verdict.outcome is Outcome.COMMITTED:
            reached(CrashPoint.BEFORE_SETTLE)
            action = Action.SETTLED
        elif verdict.outcome is Outcome.UNCHANGED and self.config.on_unchanged == "replay":
            reached(CrashPoint.BEFORE_REPLAY)
            await self._replay(intent, wrapper)
            reached(CrashPoint.AFTER_REPLAY)
            action = Action.REPLAYED
        elif verdict.outcome is Outcome.UNCHANGED:
            await self._refuse(
                intent, verdict.outcome, Reason.OPERATOR_REQUIRED, evidence, Action.LEFT_PENDING
            )
        else:
            await self._refuse(intent, verdict.outcome, verdict.reason, evidence)
        decision = self._decision(intent, verdict.outcome, verdict.reason, action, evidence)
        await self._journal_call(self.journal.settle, decision, owner=current_owner())
        self._after_settlement(intent, context)
        if action is Action.REPLAYED:
            logger.info(
                "session %s: replayed missing batch of intent %s", self.session_id, intent.intent_id
            )
        return decision

    async def _replay(
        self,
        intent: PendingWrite,
        wrapper: RunContextWrapper[Any] | None,
        *,
        store: RevisionedStore | None = None,
        expected: int = 0,
        write_id: str | None = None,
    ) -> int | None:
        """Append the missing batch once. A cancelled caller gets its cancellation at once;
        the append goes on in the background, still owning the intent, so nobody replays it
        meanwhile, and releases it when it ends (the next reconciliation then settles it)."""
        # Whatever happens next, the store may change: no memory of its tail survives this.
        self._tail = None
        batch = self._replay_batch(intent)
        with self._no_reconcile():
            task: asyncio.Future[int | None] = asyncio.ensure_future(
                self._inner_add(batch, wrapper)
                if store is None
                else store.append_if(
                    batch,
                    expected=expected,
                    write_id=write_id or intent.intent_id,
                    writer=str(current_owner()),
                )
            )
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                _REPLAYING.add(intent.intent_id)
                _BACKGROUND.add(task)
                task.add_done_callback(partial(self._replay_ended, intent))
            raise

    def _replay_ended(self, intent: PendingWrite, task: asyncio.Future[int | None]) -> None:
        _BACKGROUND.discard(task)
        _REPLAYING.discard(intent.intent_id)
        _BUSY.discard(intent.intent_id)
        if not task.cancelled():
            task.exception()  # retrieved: the outcome is settled by the next reconciliation
        release = asyncio.ensure_future(self._release(intent))
        _BACKGROUND.add(release)
        release.add_done_callback(_BACKGROUND.discard)

    def _after_settlement(
        self, intent: PendingWrite, context: MutableMapping[str, Any] | None
    ) -> None:
        if context is not None:
            runstate.drop(context, intent.intent_id)
        self._unjournaled.pop(intent.intent_id, None)
        self._in_hand.pop(intent.intent_id, None)
        # A settlement is a counted write; the next append re-reads the tail in any case.
        self._tail = None
        self._settled = _Settled(intent.batch_digests, intent.before_digests + intent.batch_digests)

    def _decision(
        self,
        intent: PendingWrite | None,
        outcome: Outcome,
        reason: Reason,
        action: Action,
        evidence: dict[str, Any],
        *,
        intent_id: str | None = None,
    ) -> Decision:
        return Decision(
            intent_id=intent.intent_id if intent is not None else (intent_id or "unknown"),
            session_id=self.session_id,
            backend=self.backend_identity,
            outcome=outcome,
            reason=reason,
            action=action,
            decided_at=time.time(),
            evidence=evidence,
        )

    async def _refuse(
        self,
        intent: PendingWrite | None,
        outcome: Outcome,
        reason: Reason,
        evidence: dict[str, Any],
        action: Action = Action.DENIED,
        *,
        intent_id: str | None = None,
        binding: bool = False,
        cause: BaseException | None = None,
    ) -> NoReturn:
        """Record a denial in the trail (best effort) and raise it."""
        decision = self._decision(intent, outcome, reason, action, evidence, intent_id=intent_id)
        try:
            await self.journal.note(decision)
        except JournalError:
            logger.warning(
                "could not record denial of intent %s", decision.intent_id, exc_info=True
            )
        logger.warning("session %s: %s", self.session_id, decision.reason.explanation)
        raise (BindingMismatch if binding else ContinuationDenied)(decision) from cause

    async def _journal_call(
        self, operation: Callable[..., Awaitable[_T]], *args: Any, **kwargs: Any
    ) -> _T:
        """Run a journal operation, retrying briefly while it is unavailable; a record it
        cannot trust is a denial."""
        attempts = self.config.journal_retries
        for attempt in range(attempts):
            try:
                return await operation(*args, **kwargs)
            except JournalUnavailable:
                if attempt == attempts - 1:
                    raise
                await asyncio.sleep(0.05 * 2**attempt)
            except RecordError as exc:
                unsupported = isinstance(exc, UnsupportedRecordVersion)
                await self._refuse(
                    None,
                    Outcome.AMBIGUOUS,
                    Reason.UNSUPPORTED_RECORD if unsupported else Reason.RECORD_UNTRUSTED,
                    {"journal_error": str(exc)},
                    binding=unsupported,
                    cause=exc,
                )
        raise AssertionError("unreachable")

    # -- the RunState copy ---------------------------------------------------------------

    async def _adopt_context_copies(self, context: MutableMapping[str, Any] | None) -> None:
        """Check the intents a RunState carries against the journal, recording unknown ones.
        Copies of other sessions' intents (a context shared by several sessions) are left as
        they are, for their own session."""
        entries = runstate.carried_entries(context)
        if isinstance(entries, runstate.Refusal):
            await self._refuse_binding(entries)
        for raw in entries:
            assert context is not None
            intent = runstate.check_carried(
                raw, session_id=self.session_id, backend=self.backend_identity
            )
            if intent is None:
                continue
            if isinstance(intent, runstate.Refusal):
                await self._refuse_binding(intent)
            if await self._journal_call(self.journal.is_settled, intent.intent_id):
                runstate.drop(context, intent.intent_id)
                continue
            entry = await self._journal_call(self.journal.get, intent.intent_id)
            if entry is None:
                await self._journal_call(
                    self.journal.record, intent, state=IntentState.FAILED, owner=current_owner()
                )
            elif not entry.intent.same_content(intent):
                evidence = {
                    "journal": entry.intent.to_mapping()["digest"],
                    "run_state": intent.to_mapping()["digest"],
                }
                await self._refuse_binding(
                    runstate.Refusal(Reason.COPIES_DISAGREE, evidence, intent)
                )

    async def _refuse_binding(self, refusal: runstate.Refusal) -> NoReturn:
        await self._refuse(
            refusal.intent,
            Outcome.AMBIGUOUS,
            refusal.reason,
            refusal.evidence,
            intent_id=refusal.intent_id,
            binding=True,
            cause=refusal.cause,
        )

    # -- calling the inner session -------------------------------------------------------

    async def _call(
        self, method: Callable[..., Any], name: str, wrapper: Any, *args: Any, **kwargs: Any
    ) -> Any:
        if wrapper is not None and self._takes_wrapper[name]:
            kwargs["wrapper"] = wrapper
        result = method(*args, **kwargs)
        if inspect.isawaitable(result):
            return await result
        return result

    async def _inner_get(self, limit: int | None, wrapper: Any) -> list[TResponseInputItem]:
        if limit is None:
            items = await self._call(self._inner.get_items, "get_items", wrapper)
        elif self._get_takes_limit:
            items = await self._call(self._inner.get_items, "get_items", wrapper, limit=limit)
        else:
            # A legacy session without ``limit``: read everything and keep the tail.
            items = await self._call(self._inner.get_items, "get_items", wrapper)
            items = items[-limit:] if limit > 0 else items
        return list(items)

    async def _inner_add(self, items: list[Any], wrapper: Any) -> None:
        self._writes += 1
        await self._call(self._inner.add_items, "add_items", wrapper, items)


class _Progress:
    """Where one append stands: how often it had to build its write again (against its wait
    bound), and whether its batch went to the store (after that, its failure is uncertain)."""

    def __init__(self, bound: float) -> None:
        self.bound = bound
        self.count = 0
        self.started = False
        self._deadline = time.monotonic() + bound

    @property
    def spent(self) -> bool:
        return time.monotonic() >= self._deadline

    def pause(self) -> float:
        # Each refused attempt means another writer got through: a short, growing, random
        # pause lets it finish instead of meeting it again at once.
        return random.uniform(0.0, min(0.05, 0.001 * 2 ** min(self.count, 6)))


class _AlreadySettled(Exception):
    """Someone else settled the intent while this process waited for it."""

    def __init__(self, intent_id: str) -> None:
        super().__init__(intent_id)
        self.intent_id = intent_id


class _Mutation:
    """Serialises this wrapper's mutations (waiting a bounded time) and settles pending
    intents first."""

    def __init__(
        self,
        session: ReconcilingSession,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
        *,
        settle: bool,
    ) -> None:
        self._session = session
        self._context = context
        self._wrapper = wrapper
        self._settle = settle
        self._lock: asyncio.Lock | None = None

    async def __aenter__(self) -> None:
        session = self._session
        lock = session._loop_lock()
        bound = session.config.in_flight_wait
        try:
            async with asyncio.timeout(bound):
                await lock.acquire()
        except TimeoutError:
            await session._refuse(
                None,
                Outcome.AMBIGUOUS,
                Reason.SESSION_BUSY,
                {"waited_seconds": bound},
                intent_id="none",
            )
        self._lock = lock
        if self._settle:
            try:
                await session._settle_pending(self._context, self._wrapper, locked=True)
            except BaseException:
                lock.release()
                self._lock = None
                raise

    async def __aexit__(self, *exc: object) -> None:
        if self._lock is not None:
            self._lock.release()


def _blocked(entry: JournalEntry, lease_seconds: float) -> bool:
    """Whether a live owner (another task of this process, or another live process) holds
    the intent, so it is not ours to settle yet."""
    if entry.intent.intent_id in _BUSY:
        return True
    if entry.state not in (IntentState.IN_FLIGHT, IntentState.RECONCILING):
        return False
    if entry.owner == current_owner():
        return False
    return entry.owner.is_live(
        age_seconds=time.time() - entry.updated_at, lease_seconds=lease_seconds
    )


def _accepts(method: Any, name: str) -> bool:
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in parameters
    )


async def _despite_cancellation(awaitable: Awaitable[_T]) -> _T:
    """Finish ``awaitable`` even if the caller is cancelled meanwhile, then re-raise that."""
    task = asyncio.ensure_future(awaitable)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    result = task.result()
    if cancelled is not None:
        raise cancelled
    return result


# -- guarded capability hooks ---------------------------------------------------------------


def _guard_get_with_generation(session: ReconcilingSession, target: Any) -> Any:
    async def forwarded(callback: Callable[[], Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        # Settle before the inner session takes its lock: a replay inside the callback would
        # wait for that same lock forever.
        if session.enabled and not _NO_RECONCILE.get():
            await session._settle_pending(None)
        with session._no_reconcile():
            return await target(callback, *args, **kwargs)

    return forwarded


def _guard_add_with_generation(session: ReconcilingSession, target: Any) -> Any:
    async def forwarded(write: Callable[[], Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        if session.enabled and not _NO_RECONCILE.get():
            await session._settle_pending(None)
        return await target(write, *args, **kwargs)

    return forwarded


def _guard_compaction(session: ReconcilingSession, target: Any) -> Any:
    async def forwarded(*args: Any, **kwargs: Any) -> Any:
        if session.enabled:
            await session._settle_pending(None)
        try:
            return await target(*args, **kwargs)
        finally:
            # Compaction rewrites history: what this wrapper remembers of the tail is void.
            session._tail = None
            session._settled = None

    return forwarded


_GUARDS: Final[dict[str, Callable[[ReconcilingSession, Any], Any]]] = {
    "_get_items_with_generation": _guard_get_with_generation,
    "_add_items_with_generation": _guard_add_with_generation,
    "run_compaction": _guard_compaction,
}
