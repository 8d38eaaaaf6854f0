"""``ReconcilingSession``: records each write's intent and settles uncertain ones before going on.

The rule lives in ``classify``; this module does the I/O around it: the journal, the inner
session's tail, the RunState copy of each intent, and the replay of a missing batch.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeVar

from agents.memory import OpenAIConversationsSession

from . import runstate
from .classify import Observation, classify, observation_window
from .config import ReconcileConfig
from .crashpoints import CrashPoint, reached
from .errors import (
    BindingMismatch,
    ConfigurationError,
    ContinuationDenied,
    FingerprintError,
    JournalError,
    JournalUnavailable,
    RecordError,
    UnsupportedRecordVersion,
    UnsupportedSession,
)
from .fingerprint import canonical_item, digest_items
from .identity import derive_identity
from .journal import IntentJournal, IntentState, JournalEntry, open_journal
from .ownership import current_owner
from .records import (
    Action,
    BackendIdentity,
    Decision,
    Outcome,
    PendingWrite,
    Reason,
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
    """Digests of the newest items as this wrapper last saw them; ``whole`` if that is all."""

    digests: list[str]
    whole: bool


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
        if isinstance(inner, OpenAIConversationsSession):
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
        self._ignore_ids = bool(getattr(inner, "_ignore_ids_for_matching", False))
        self._journal: IntentJournal | None = None
        self._tail: _Tail | None = None
        self._settled: _Settled | None = None
        self._unjournaled: dict[str, PendingWrite] = {}
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
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
        if self._active and not _NO_RECONCILE.get():
            await self._settle_pending(runstate.context_of(wrapper))
        items = await self._inner_get(limit, wrapper)
        if self._active:
            self._observe_read(items, limit)
        return items

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Append ``items`` under a recorded intent; a failure keeps the intent pending and
        re-raises the backend's own exception with a note naming it."""
        if not self._active:
            await self._inner_add(items, wrapper)
            return
        digests = digest_items(items, ignore_ids=self._ignore_ids)
        if not items:
            await self._inner_add(items, wrapper)
            return
        context = runstate.context_of(wrapper)
        write_ahead = self.config.durability == "write_ahead"
        # Under write_ahead the journal checks for pending intents in the same transaction
        # that records the new one, so settling first would only repeat that query.
        async with self._mutation(context, settle=not write_ahead):
            while True:
                if write_ahead and (
                    self._unjournaled or (context is not None and runstate.CONTEXT_KEY in context)
                ):
                    await self._settle_pending(context, locked=True)
                if self._is_retried_batch(digests):
                    logger.info(
                        "session %s: batch equal to the one just settled was not appended again",
                        self.session_id,
                    )
                    self._settled = None
                    return
                intent = await self._new_intent(items, digests, wrapper)
                reached(CrashPoint.BEFORE_INTENT_RECORDED)
                if write_ahead:
                    blocking = await self._journal_call(
                        self.journal.open_intent,
                        intent,
                        state=IntentState.IN_FLIGHT,
                        owner=current_owner(),
                    )
                    if blocking:
                        await self._settle_pending(context, locked=True)
                        continue
                break
            self._settled = None
            await self._append(intent, items, wrapper, context, recorded=write_ahead)

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Remove the newest item, after settling pending intents."""
        if not self._active:
            popped: TResponseInputItem | None = await self._call(
                self._inner.pop_item, "pop_item", wrapper
            )
            return popped
        async with self._mutation(runstate.context_of(wrapper)):
            self._tail = None
            self._settled = None
            result: TResponseInputItem | None = await self._call(
                self._inner.pop_item, "pop_item", wrapper
            )
            return result

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Clear the history, after settling pending intents."""
        if not self._active:
            await self._call(self._inner.clear_session, "clear_session", wrapper)
            return
        async with self._mutation(runstate.context_of(wrapper)):
            self._tail = None
            self._settled = None
            await self._call(self._inner.clear_session, "clear_session", wrapper)
            self._tail = _Tail([], whole=True)

    # -- public controls ------------------------------------------------------------------

    async def pending(self) -> list[PendingWrite]:
        """Unresolved intents the journal holds for this session and backend (no reconciling)."""
        entries = await self.journal.pending(self.session_id, self.backend_identity)
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

    async def decisions(self, limit: int = 100) -> list[Decision]:
        """This session's recorded decisions, newest first."""
        return await self.journal.decisions(session_id=self.session_id, limit=limit)

    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """``base`` (or a new ``RunConfig``) with the gate installed before every model call."""
        from .gate import install_gate

        return install_gate(self, base)

    def hooks(self, base: RunHooks[Any] | None = None) -> RunHooks[Any]:
        """``RunHooks`` whose ``on_llm_start`` runs the gate, delegating everything to ``base``."""
        from .gate import gate_hooks

        return gate_hooks(self, base)

    # -- the write path -------------------------------------------------------------------

    async def _new_intent(
        self, items: list[Any], digests: tuple[str, ...], wrapper: RunContextWrapper[Any] | None
    ) -> PendingWrite:
        before, whole = await self._before(len(items), wrapper)
        return PendingWrite(
            intent_id=uuid.uuid4().hex,
            session_id=self.session_id,
            backend=self.backend_identity,
            batch=tuple(item if isinstance(item, dict) else canonical_item(item) for item in items),
            batch_digests=digests,
            before_digests=before,
            before_is_whole=whole,
            created_at=time.time(),
            persisted_count=len(before) if whole else None,
            ignore_ids=self._ignore_ids,
        )

    async def _append(
        self,
        intent: PendingWrite,
        items: list[TResponseInputItem],
        wrapper: RunContextWrapper[Any] | None,
        context: MutableMapping[str, Any] | None,
        *,
        recorded: bool,
    ) -> None:
        write_ahead = recorded
        reached(CrashPoint.AFTER_INTENT_RECORDED)
        _BUSY.add(intent.intent_id)
        try:
            await self._inner_add(items, wrapper)
        except BaseException as exc:
            state = (
                IntentState.CANCELLED
                if isinstance(exc, asyncio.CancelledError)
                else IntentState.FAILED
            )
            self._tail = None
            note = await _despite_cancellation(
                self._remember_failure(intent, state, context, recorded=write_ahead)
            )
            exc.add_note(note)
            raise
        finally:
            _BUSY.discard(intent.intent_id)
        if self._tail is not None:
            self._extend_tail(intent.batch_digests)
        reached(CrashPoint.BEFORE_INTENT_CLEARED)
        if write_ahead:
            try:
                await self.journal.discard(intent.intent_id)
            except JournalError:
                # The append is acknowledged; the intent will classify as COMMITTED later.
                logger.warning(
                    "session %s: intent %s could not be cleared from the journal; it will be "
                    "settled on the next reconciliation",
                    self.session_id,
                    intent.intent_id,
                    exc_info=True,
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
        where = "the RunState context" if context is not None else "this session object"
        try:
            if recorded:
                await self.journal.transition(intent.intent_id, state=state, owner=current_owner())
            else:
                await self.journal.record(intent, state=state, owner=current_owner())
            where = "the journal" + (" and the RunState context" if context is not None else "")
        except JournalError as journal_error:
            # Kept in memory only: detach it from the caller's (mutable) items first.
            self._unjournaled[intent.intent_id] = PendingWrite.decode(intent.encode())
            where += f" (the journal failed: {journal_error})"
        return (
            f"agents-reconcile: the outcome of this append is unknown; intent "
            f"{intent.intent_id} for session {self.session_id!r} is pending in {where} and "
            f"will be reconciled before the session is used again"
        )

    async def _before(
        self, batch_len: int, wrapper: RunContextWrapper[Any] | None
    ) -> tuple[tuple[str, ...], bool]:
        needed = batch_len + 1
        tail = self._tail
        if tail is None or (not tail.whole and len(tail.digests) < needed):
            items = await self._inner_get(needed, wrapper)
            self._observe_read(items, needed)
            tail = self._tail
            assert tail is not None
        before = tuple(tail.digests[-needed:])
        return before, tail.whole and len(tail.digests) <= needed

    def _observe_read(self, items: Sequence[Any], limit: int | None) -> None:
        newest = items[-_TAIL_KEEP:]
        try:
            digests = list(digest_items(newest, ignore_ids=self._ignore_ids))
        except FingerprintError:
            self._tail = None
            return
        complete = limit is None or limit <= 0 or len(items) < limit
        known = self._tail
        if (
            not complete
            and known is not None
            and len(known.digests) > len(digests)
            and known.digests[len(known.digests) - len(digests) :] == digests
        ):
            # A short read that agrees with what is known says nothing new: keep the longer view.
            return
        self._tail = _Tail(digests, whole=complete and len(items) <= _TAIL_KEEP)

    def _extend_tail(self, digests: Sequence[str]) -> None:
        assert self._tail is not None
        merged = self._tail.digests + list(digests)
        self._tail = _Tail(merged[-_TAIL_KEEP:], self._tail.whole and len(merged) <= _TAIL_KEEP)

    def _is_retried_batch(self, digests: tuple[str, ...]) -> bool:
        settled = self._settled
        if settled is None or not self.config.merge_retried_input or settled.batch != digests:
            return False
        tail = self._tail
        return tail is not None and tuple(tail.digests[-len(settled.tail) :]) == settled.tail

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
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    def _mutation(
        self, context: MutableMapping[str, Any] | None, *, settle: bool = True
    ) -> _Mutation:
        return _Mutation(self, context, settle=settle)

    def _exclusive(self) -> _Mutation:
        return _Mutation(self, None, settle=False)

    async def _settle_pending(
        self, context: MutableMapping[str, Any] | None, *, locked: bool = False
    ) -> list[Decision]:
        """Settle every pending intent of this session, oldest first; deny on the first that
        cannot be vouched for."""
        await self._adopt_context_copies(context)
        decisions: list[Decision] = []
        try:
            entries = await self._journal_call(
                self.journal.pending, self.session_id, self.backend_identity
            )
        except RecordError as exc:
            await self._refuse(
                None,
                Outcome.AMBIGUOUS,
                Reason.UNSUPPORTED_RECORD
                if isinstance(exc, UnsupportedRecordVersion)
                else Reason.RECORD_UNTRUSTED,
                {"journal_error": str(exc)},
                cause=exc,
            )
        if not entries and not self._unjournaled:
            return decisions
        if not locked:
            async with self._exclusive():
                return decisions + await self._settle_pending(context, locked=True)
        for entry in entries:
            try:
                decisions.append(await self._settle_entry(entry, context))
            except _AlreadySettled:
                continue
        for intent in list(self._unjournaled.values()):
            decisions.append(await self._settle_unjournaled(intent, context))
        return decisions

    async def _settle_unjournaled(
        self, intent: PendingWrite, context: MutableMapping[str, Any] | None
    ) -> Decision:
        await self._journal_call(
            self.journal.record, intent, state=IntentState.FAILED, owner=current_owner()
        )
        del self._unjournaled[intent.intent_id]
        entry = await self._journal_call(self.journal.get, intent.intent_id)
        if entry is None:
            self._unjournaled[intent.intent_id] = intent
            raise JournalUnavailable(f"intent {intent.intent_id} vanished from the journal")
        return await self._settle_entry(entry, context)

    async def _settle_entry(
        self, entry: JournalEntry, context: MutableMapping[str, Any] | None
    ) -> Decision:
        intent = entry.intent
        entry = await self._claim(entry)
        _BUSY.add(intent.intent_id)
        try:
            return await self._decide(intent, context)
        except BaseException:
            await _despite_cancellation(self._release(intent))
            raise
        finally:
            _BUSY.discard(intent.intent_id)

    async def _claim(self, entry: JournalEntry) -> JournalEntry:
        """Take ownership of an intent, waiting (bounded) for a live owner to finish."""
        deadline = time.monotonic() + self.config.in_flight_wait
        me = current_owner()
        while True:
            current: JournalEntry | None = entry
            if _blocked(current, self.config.lease_seconds):
                if time.monotonic() >= deadline:
                    await self._refuse(
                        entry.intent,
                        Outcome.AMBIGUOUS,
                        Reason.IN_FLIGHT_ELSEWHERE,
                        {
                            "state": entry.state.value,
                            "owner": str(entry.owner),
                        },
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
                return entry
            current = await self._journal_call(self.journal.get, entry.intent.intent_id)
            if current is None:
                raise _AlreadySettled(entry.intent.intent_id)
            entry = current

    async def _release(self, intent: PendingWrite) -> None:
        try:
            await self.journal.transition(
                intent.intent_id,
                state=IntentState.FAILED,
                owner=current_owner(),
                expect_state=IntentState.RECONCILING,
                expect_owner=current_owner(),
            )
        except JournalError:
            logger.warning("could not release intent %s", intent.intent_id, exc_info=True)

    async def _decide(
        self, intent: PendingWrite, context: MutableMapping[str, Any] | None
    ) -> Decision:
        window = observation_window(intent)
        with self._no_reconcile():
            items = await self._inner_get(window, None)
        tail = tuple(digest_items(items[-window:], ignore_ids=intent.ignore_ids))
        reached(CrashPoint.DURING_RECONCILE_READ)
        verdict = classify(intent, Observation(tail))
        evidence = verdict.evidence
        if verdict.outcome is Outcome.COMMITTED:
            decision = self._decision(
                intent, verdict.outcome, verdict.reason, Action.SETTLED, evidence
            )
            reached(CrashPoint.BEFORE_SETTLE)
            await self._journal_call(self.journal.settle, decision)
            self._after_settlement(intent, tail, window, context, replayed=False)
            return decision
        if verdict.outcome is Outcome.UNCHANGED and self.config.on_unchanged == "replay":
            reached(CrashPoint.BEFORE_REPLAY)
            with self._no_reconcile():
                await _despite_cancellation(
                    self._inner_add(copy.deepcopy(list(intent.batch)), None)
                )
            reached(CrashPoint.AFTER_REPLAY)
            decision = self._decision(
                intent, verdict.outcome, verdict.reason, Action.REPLAYED, evidence
            )
            await self._journal_call(self.journal.settle, decision)
            self._after_settlement(intent, tail, window, context, replayed=True)
            logger.info(
                "session %s: replayed missing batch of intent %s", self.session_id, intent.intent_id
            )
            return decision
        if verdict.outcome is Outcome.UNCHANGED:
            await self._refuse(
                intent, verdict.outcome, Reason.OPERATOR_REQUIRED, evidence, Action.LEFT_PENDING
            )
        await self._refuse(intent, verdict.outcome, verdict.reason, evidence)

    def _after_settlement(
        self,
        intent: PendingWrite,
        tail: tuple[str, ...],
        window: int,
        context: MutableMapping[str, Any] | None,
        *,
        replayed: bool,
    ) -> None:
        if context is not None:
            runstate.drop(context, intent.intent_id)
        self._unjournaled.pop(intent.intent_id, None)
        stored = tail + intent.batch_digests if replayed else tail
        whole = len(tail) < window
        self._tail = _Tail(list(stored[-_TAIL_KEEP:]), whole and len(stored) <= _TAIL_KEEP)
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
        """Run a journal operation, retrying briefly while it is unavailable."""
        attempts = self.config.journal_retries
        for attempt in range(attempts):
            try:
                return await operation(*args, **kwargs)
            except JournalUnavailable:
                if attempt == attempts - 1:
                    raise
                await asyncio.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

    # -- the RunState copy ---------------------------------------------------------------

    async def _adopt_context_copies(self, context: MutableMapping[str, Any] | None) -> None:
        """Check the intents a RunState carries against the journal, recording unknown ones."""
        entries = runstate.carried_entries(context)
        if isinstance(entries, runstate.Refusal):
            await self._refuse_binding(entries)
        assert context is not None or not entries
        for raw in entries:
            intent = runstate.check_carried(
                raw, session_id=self.session_id, backend=self.backend_identity
            )
            if isinstance(intent, runstate.Refusal):
                await self._refuse_binding(intent)
            assert context is not None
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

    async def _call(self, method: Callable[..., Any], name: str, wrapper: Any, *args: Any) -> Any:
        kwargs = {"wrapper": wrapper} if wrapper is not None and self._takes_wrapper[name] else {}
        result = method(*args, **kwargs)
        if inspect.isawaitable(result):
            return await result
        return result

    async def _inner_get(self, limit: int | None, wrapper: Any) -> list[TResponseInputItem]:
        if limit is None:
            items = await self._call(self._inner.get_items, "get_items", wrapper)
        elif self._get_takes_limit:
            kwargs: dict[str, Any] = {"limit": limit}
            if wrapper is not None and self._takes_wrapper["get_items"]:
                kwargs["wrapper"] = wrapper
            items = await _maybe_await(self._inner.get_items(**kwargs))
        else:
            # A legacy session without ``limit``: read everything and keep the tail.
            items = await self._call(self._inner.get_items, "get_items", wrapper)
            items = items[-limit:] if limit > 0 else items
        return list(items)

    async def _inner_add(self, items: list[Any], wrapper: Any) -> None:
        await self._call(self._inner.add_items, "add_items", wrapper, items)


class _AlreadySettled(Exception):
    """Someone else settled the intent while this process waited for it."""

    def __init__(self, intent_id: str) -> None:
        super().__init__(intent_id)
        self.intent_id = intent_id


class _Mutation:
    """Serialises this wrapper's mutations and settles pending intents first."""

    def __init__(
        self,
        session: ReconcilingSession,
        context: MutableMapping[str, Any] | None,
        *,
        settle: bool,
    ) -> None:
        self._session = session
        self._context = context
        self._settle = settle
        self._lock: asyncio.Lock | None = None

    async def __aenter__(self) -> None:
        session = self._session
        lock = session._loop_lock()
        if not lock.locked():
            # Free: acquiring cannot block, so skip the timer task wait_for would create.
            await lock.acquire()
        else:
            await self._acquire_within_bound(lock)
        self._lock = lock
        if self._settle:
            try:
                await session._settle_pending(self._context, locked=True)
            except BaseException:
                lock.release()
                self._lock = None
                raise

    async def _acquire_within_bound(self, lock: asyncio.Lock) -> None:
        session = self._session
        try:
            await asyncio.wait_for(
                lock.acquire(), timeout=max(session.config.in_flight_wait, 0.001)
            )
        except TimeoutError:
            await session._refuse(
                None,
                Outcome.AMBIGUOUS,
                Reason.IN_FLIGHT_ELSEWHERE,
                {"waited_seconds": session.config.in_flight_wait},
                intent_id="local",
            )

    async def __aexit__(self, *exc: object) -> None:
        if self._lock is not None:
            self._lock.release()


def _blocked(entry: JournalEntry | None, lease_seconds: float) -> bool:
    """Whether a live owner other than a finished task of this process holds the intent."""
    if entry is None:
        return False
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


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


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
