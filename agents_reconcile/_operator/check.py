"""Checking one stored session for damage, and repairing it so that no crash can lose it.

``check_session`` reads a history by address and reports what ``damage`` finds and would
repair; reading never writes (SQLite files open read-only, server stores are not migrated).
A path or ``sqlite:///`` names a file of the SDK's ``SQLiteSession`` or of this package's
revisioned store (its tables say which); ``redis://`` and ``postgresql://`` name the revisioned
stores; a SQLAlchemy URL naming its driver (``postgresql+asyncpg://``) the SDK's
``SQLAlchemySession``.

A repair is an uncertain write. The wrapper's ``clear_session`` then ``add_items`` would not
survive a crash between them (a clear is only counted: nothing would rebuild the history), so
an intent is recorded first, write-ahead: its batch is the repaired history, the history before
it empty and whole. A crash before the clear leaves the old history, judged ``history_changed``
and denied (nothing lost); after it, an empty session, judged ``unchanged``: the next
reconciliation appends the repaired history; after the append, it is found committed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agents.memory import OpenAIConversationsSession

from .._backends.journal import IntentJournal, IntentState
from .._backends.redaction import redacted
from .._backends.registry import backend_for
from .._backends.rows import collecting_damage
from .._backends.sealing_marks import unsealed_write
from .._backends.store_items import new_write_id
from .._core.cancellation import despite_cancellation
from .._core.crashpoints import CrashPoint, reached
from .._core.fingerprint import journal_batch
from .._core.ownership import current_owner, default_actor
from .._core.records import Action, Decision, Outcome, PendingWrite, Reason
from .._core.sealing import Keyring, PayloadKey
from .._session.config import ReconcileConfig
from .._session.journal_client import SESSION_WIDE
from .._session.session import ReconcilingSession
from ..errors import (
    ConfigurationError,
    JournalError,
    PayloadKeyUnknown,
    ReconcileError,
    RecordError,
)
from .damage import Damage, RepairPlan, find_damage, plan_repair
from .journals import opened_journal
from .presence import NotFound
from .stores import close_store, open_by_address, read_history

__all__ = ["CheckReport", "RepairRefused", "check_session", "repair_session", "sealed_elsewhere"]


class RepairRefused(ReconcileError):
    """A repair was refused and nothing was written: intents of the session are pending, the
    session was written while it was checked, or part of it cannot be read back."""


@dataclass(frozen=True)
class CheckReport:
    """What a check found, what its repair removed (or would), what is left for a person."""

    store: str
    layout: str
    session_id: str
    damage: Damage
    plan: RepairPlan
    unreadable: int = 0
    """Rows the SDK's ``SQLiteSession`` skips because they do not decode."""
    pending: tuple[str, ...] = ()
    repaired: bool = False
    intent_id: str | None = None

    @property
    def needs_operator(self) -> bool:
        """Whether a person has something to do: damage is stored (not repaired), or is left
        for a person, rows do not decode, or intents are pending."""
        unrepaired = self.damage.damaged and not self.repaired
        return unrepaired or bool(self.plan.left or self.unreadable or self.pending)

    def to_json(self) -> dict[str, Any]:
        body = {name: getattr(self, name) for name in ("store", "layout", "session_id")}
        return body | {
            # Positions in this document count from 0, as the trail's evidence does; the
            # lines printed for people count from 1.
            "positions_count_from": 0,
            "damage": self.damage.to_json(),
            "plan": self.plan.to_json(),
            "unreadable_rows": self.unreadable,
            "pending_intents": list(self.pending),
            "repaired": self.repaired,
            "intent_id": self.intent_id,
        }

    def lines(self) -> list[str]:
        """The report for people, one finding a line: ids, positions (the first item is 1) and
        digests only."""
        damage, plan = self.damage, self.plan
        lines = [
            f"session {self.session_id!r} ({self.layout}, {self.store}): {damage.count} items "
            "(positions count from 1)"
        ]
        if self.unreadable:
            lines.append(f"{self.unreadable} stored rows do not decode (the SDK skips them)")
        if self.pending:
            lines.append(f"pending intents (resolve them first): {', '.join(self.pending)}")
        for finding in damage.findings:
            call = f" call_id={finding.call_id}" if finding.call_id else ""
            shown = ", ".join(
                f"{p + 1}:{d[:12]}" for p, d in zip(finding.positions, finding.digests, strict=True)
            )
            lines.append(f"  {finding.kind.value} [{shown}] {finding.item_type or 'run'}{call}")
        removed = ", ".join(str(removal.position + 1) for removal in plan.removals)
        if not damage.findings:
            lines.append("no damage found")
        elif self.repaired:
            under = f" under intent {self.intent_id}" if self.intent_id else ""
            lines.append(f"repaired{under}: removed positions {removed}")
        elif removed:
            lines.append(f"a repair would remove positions {removed}")
        for left in plan.left:
            where = ", ".join(str(p + 1) for p in left.finding.positions)
            lines.append(f"left for a person: {left.finding.kind.value} [{where}]: {left.why}")
        return lines

    def text(self) -> str:
        return "\n".join(self.lines())


async def check_session(
    store: str,
    session_id: str,
    *,
    repair: bool = False,
    journal: str | None = None,
    actor: str | None = None,
    reason: str | None = None,
    namespace: str | None = None,
    payload_keys: Sequence[PayloadKey] = (),
    journal_namespace: str | None = None,
) -> CheckReport:
    """Check the session ``session_id`` at the address ``store`` (``namespace``: a server
    store's key prefix or schema; ``journal_namespace``: the journal's). Without ``repair``
    nothing is written anywhere; the journal, when given, is read for the session's pending
    intents. With ``repair`` the repaired history is written (``repair_session``) under an
    intent in ``journal``, which must be named, be there already (a repair creates no journal)
    and be the journal the application uses: a repair recorded anywhere else would not be
    found by the application if it were interrupted. ``payload_keys``: the deployment's,
    where it seals payloads (``ReconcileConfig(payload_key=...)``): the repair's intent is
    sealed with them, and without them a journal that shows sealed records is not
    repaired."""
    layout, items, unreadable = await read_history(store, session_id, namespace)
    shown = redacted(store)
    if not items and not unreadable:
        # The store knows the sessions it holds items of: an empty history is no session to
        # check (a mistyped id, or another store), never "no damage".
        where = shown + (f" (namespace {namespace!r})" if namespace else "")
        raise NotFound(
            f"no session {session_id!r} in store {where}: it holds no item of it",
            what="session",
            name=session_id,
        )
    if repair:
        if journal is None:
            raise RepairRefused(
                "a repair needs the application's journal (--journal): its write-ahead intent "
                "is what recovers an interrupted repair; nothing was written"
            )
        if unreadable:
            raise RepairRefused(
                f"{unreadable} rows of session {session_id!r} do not decode: rewriting the "
                "history would lose them; nothing was written"
            )
        ledger = await _ledger(journal, journal_namespace, session_id, payload_keys)
        session = open_by_address(store, session_id, layout, namespace)
        try:
            return await repair_session(
                session,
                journal=ledger,
                actor=actor,
                reason=reason,
                store=shown,
                layout=layout,
                payload_keys=payload_keys,
            )
        finally:
            await close_store(session)
    pending: tuple[str, ...] = ()
    if journal is not None:
        keys = Keyring(payload_keys)
        opened = await opened_journal(journal, namespace=journal_namespace, keyring=keys)
        try:
            pending = await _pending(opened, session_id)
        finally:
            await opened.close()
    damage = find_damage(items)
    return CheckReport(shown, layout, session_id, damage, plan_repair(damage), unreadable, pending)


async def _ledger(
    journal: str, namespace: str | None, session_id: str, payload_keys: Sequence[PayloadKey]
) -> IntentJournal | str:
    """The journal a repair is recorded in (its address, or opened in ``namespace``), once a
    reading of it with ``payload_keys`` alone (a journal object of its own, holding no other
    wrapper's keys) shows no record sealed under a key not given.

    The journal must be there already, at this release's schema (``JournalError`` otherwise,
    saying what is there instead): a repair never creates one. The application's journal
    exists once it has run (or been migrated), so a journal missing here is a mistyped
    address, a forgotten ``--namespace`` or a misspelled schema, and creating it would record
    the repair where the application never looks."""
    keys = Keyring(payload_keys)
    reading = await opened_journal(journal, namespace=namespace, keyring=keys)
    try:
        sealed = await sealed_elsewhere(reading, session_id)
        unmarked = None if sealed is not None else await unsealed_write(reading, keys.current)
    finally:
        await reading.close()
    if sealed is not None:
        raise RepairRefused(_SEALED.format(sealed=sealed))
    if unmarked is not None:
        raise RepairRefused(_MARKED.format(problem=unmarked))
    if namespace is None:
        return journal
    return backend_for(journal, what="journal").open_journal(journal, namespace=namespace)


_MOST_TEXT: Final = 500
"""The longest actor kept, as a resolution keeps it."""
_CONVERSATION: Final = (
    "conversation {sid!r} needs {removals} item(s) removed, and a conversation cannot be "
    "rewritten in place: clearing it deletes the conversation (the next write makes another, "
    "under an id the application does not hold), and the service has no one-write replace. "
    "Nothing was written; remove the items with the API (conversations.items.delete) or start "
    "a new conversation from the repaired history"
)
_MARKED: Final = (
    "{problem}; give the deployment's payload key (--payload-key-file PATH or "
    "--payload-key-env NAME; in code, payload_keys=...), so the repaired history is sealed "
    "as the deployment's records are; nothing was written"
)
_SEALED: Final = (
    "the journal holds records sealed with a payload key not given here ({sealed}); give the "
    "deployment's payload key (--payload-key-file PATH or --payload-key-env NAME; in code, "
    "payload_keys=...), so the repaired history is sealed too; nothing was written"
)


async def repair_session(
    session: Any,
    *,
    journal: IntentJournal | str | None = None,
    actor: str | None = None,
    reason: str | None = None,
    store: str | None = None,
    layout: str = "session",
    payload_keys: Sequence[PayloadKey] = (),
) -> CheckReport:
    """Check an open SDK session and write its repaired history under a write-ahead intent in
    ``journal``; record the repair (``actor``, by default this user and host, and ``reason``)
    in the decision trail. The intent
    holds the history sealed with ``payload_keys`` (the first), where the deployment seals
    payloads, as the deployment's own intents are.

    Refused (``RepairRefused``, nothing written) for an OpenAI conversation that needs items
    removed (it cannot be rewritten in place), while an intent of the session is pending in
    the journal, when the session is written during the check, or when the journal holds a
    record sealed under a key not given (``sealed_elsewhere``), or is marked sealed under keys
    the one given is not (``sealing_marks``, even with no sealed record left in it): the
    repaired history would be written readable into a journal the deployment keeps sealed.
    If the rewrite itself fails, the store's own exception is raised with a note naming the
    intent, which stays pending: the session's next reconciliation finishes it (or denies it,
    if the old history is still there)."""
    # Recorded as every operator's write records its actor: the name given, else user@host.
    actor = (actor or "").strip()[:_MOST_TEXT] or default_actor()
    config = ReconcileConfig(journal=journal, payload_key=list(payload_keys) or None)
    wrapper = ReconcilingSession(session, config=config)
    if not wrapper.enabled:
        raise ConfigurationError("reconciliation is switched off: a repair cannot be made safe")
    if getattr(getattr(session, "session_settings", None), "limit", None) is not None:
        raise ConfigurationError("the session reads a limited history: open it without a limit")
    sid, ledger = wrapper.session_id, wrapper.journal
    try:
        waiting = await _pending(ledger, sid)
        if waiting:
            raise RepairRefused(f"session {sid!r} has pending intents ({', '.join(waiting)})")
        sealed = await sealed_elsewhere(ledger, sid)
        if sealed is not None:
            raise RepairRefused(_SEALED.format(sealed=sealed))
        # The journal's own mark: sealed once, it takes the history only sealed under a key
        # it names, even when no sealed record is left in it to show it.
        unmarked = await unsealed_write(ledger, wrapper._client.keyring.current)
        if unmarked is not None:
            raise RepairRefused(_MARKED.format(problem=unmarked))
        counted = await ledger.write_count(sid, wrapper.backend_identity)
        ignore_ids = bool(getattr(session, "_ignore_ids_for_matching", False))
        items = list(await session.get_items())
        damage = find_damage(items, ignore_ids=ignore_ids)
        plan = plan_repair(damage)
        report = CheckReport(store or type(session).__name__, layout, sid, damage, plan)
        if not plan.removals:
            return report
        if isinstance(session, OpenAIConversationsSession):
            raise RepairRefused(_CONVERSATION.format(sid=sid, removals=len(plan.removals)))
        kept = plan.apply(items)
        evidence: dict[str, Any] = {
            "actor": actor,
            "reason": reason,
            "items_before": len(items),
            "items_after": len(kept),
            "removed": [removal.position for removal in plan.removals],
            "removed_digests": [removal.digest for removal in plan.removals],
            "left_for_person": len(plan.left),
        }
        intent_id = None
        if kept:
            intent_id = await _rewrite(wrapper, kept, counted, ignore_ids, evidence)
        elif await ledger.write_count(sid, wrapper.backend_identity) != counted:
            raise RepairRefused(f"session {sid!r} was written while it was checked")
        else:
            # Nothing stays: a clear is all a retry would do, so no intent is needed.
            await wrapper.clear_session()
        repaired = _decision(wrapper, evidence)
        await ledger.note(repaired)
        wrapper._client.trail.decided(repaired)
        return dataclasses.replace(report, repaired=True, intent_id=intent_id)
    finally:
        await ledger.close()


async def _rewrite(
    wrapper: ReconcilingSession,
    kept: list[Any],
    counted: int,
    ignore_ids: bool,
    evidence: dict[str, Any],
) -> str:
    """Replace the history by ``kept`` under a write-ahead intent; its id."""
    session, ledger = wrapper.inner, wrapper.journal
    batch, digests = journal_batch(kept, ignore_ids=ignore_ids)
    # The keys the wrapper seals and signs its own intents with: a reconciliation that checks
    # signatures accepts this intent as any other.
    keyring = wrapper._client.keyring
    intent = PendingWrite(
        intent_id=new_write_id(),
        session_id=wrapper.session_id,
        backend=wrapper.backend_identity,
        batch=batch,
        batch_digests=digests,
        before_digests=(),  # the history before the batch: empty, and whole
        before_is_whole=True,
        created_at=time.time(),
        persisted_count=0,
        ignore_ids=ignore_ids,
        seal_key=keyring.current,
        sign_key=keyring.signer.current if keyring.signer is not None else None,
    )
    me = current_owner()
    await wrapper._client.mark_sealed()
    # Recorded only if nothing was written through a write-ahead wrapper since the count was
    # read, and no other intent of the session is unresolved.
    opened = await ledger.open_intent(
        intent, state=IntentState.IN_FLIGHT, owner=me, expect_write_count=counted
    )
    if not opened.recorded:
        raise RepairRefused(f"session {wrapper.session_id!r} was written while it was checked")
    evidence["intent_id"] = intent.intent_id
    try:
        reached(CrashPoint.AFTER_INTENT_RECORDED)
        await _call(session.clear_session)
        await _call(session.add_items, list(kept))
    except BaseException as exc:
        cancelled = isinstance(exc, asyncio.CancelledError)
        state = IntentState.CANCELLED if cancelled else IntentState.FAILED
        await despite_cancellation(_leave_failed(wrapper, intent.intent_id, state, evidence))
        exc.add_note(
            f"agents-reconcile: the repair of session {wrapper.session_id!r} was interrupted; "
            f"intent {intent.intent_id} holds the repaired history, and the session's next "
            "reconciliation finishes it"
        )
        raise
    reached(CrashPoint.BEFORE_INTENT_CLEARED)
    settled = wrapper._client.decision(
        intent,
        Outcome.COMMITTED,
        Reason.BATCH_PRESENT,
        Action.SETTLED,
        {"acknowledged": True, "items": len(kept)},
    )
    await ledger.settle(settled)
    return intent.intent_id


async def _leave_failed(
    wrapper: ReconcilingSession, intent_id: str, state: IntentState, evidence: dict[str, Any]
) -> None:
    """Mark a rewrite whose outcome is unknown failed, for the next reconciliation, and say so
    in the trail (best effort: an intent left in flight is reclaimed once this process ends)."""
    me, ledger = current_owner(), wrapper.journal
    try:
        await ledger.transition(
            intent_id, state=state, owner=me, expect_state=IntentState.IN_FLIGHT, expect_owner=me
        )
        interrupted = {**evidence, "interrupted": True}
        stopped = _decision(wrapper, interrupted, Outcome.AMBIGUOUS)
        await ledger.note(stopped)
        wrapper._client.trail.decided(stopped)
    except JournalError:
        pass


def _decision(
    wrapper: ReconcilingSession, evidence: dict[str, Any], outcome: Outcome = Outcome.COMMITTED
) -> Decision:
    """The repair's entry in the decision trail, about the session as a whole."""
    # An interrupted repair (evidence "interrupted") leaves its intent for the rule, or an
    # operator, to settle.
    reason = Reason.HISTORY_REPAIRED
    action = Action.REPAIRED if outcome is Outcome.COMMITTED else Action.LEFT_PENDING
    return wrapper._client.decision(None, outcome, reason, action, evidence, intent_id=SESSION_WIDE)


async def sealed_elsewhere(journal: IntentJournal, session_id: str) -> str | None:
    """Which sealed record the journal shows that its keys cannot open (None when it shows
    none): a pending intent of any session, or an effect receipt of ``session_id``. A journal
    keeps no record of a settled intent, so one whose every intent settled and that holds no
    sealed receipt shows nothing; a damaged record shows nothing either (it is reported by
    the reads that list it)."""
    reads: list[Callable[[], Awaitable[object]]] = [lambda: journal.pending(None)]
    effects = journal.effects
    if effects is not None:
        reads.append(lambda: effects.of_session(session_id))
    for read in reads:
        try:
            await read()
        except PayloadKeyUnknown as unknown:
            return f"key {unknown.key_id}"
        except RecordError:
            continue
    return None


async def _pending(journal: IntentJournal, session_id: str) -> tuple[str, ...]:
    """The ids of the session's pending intents, in any backend; a row that cannot be read
    (damaged, or sealed under a key not held here) counts as pending too."""
    with collecting_damage() as damaged:
        entries = await journal.pending(session_id)
    return tuple(e.intent.intent_id for e in entries) + tuple(row.ident for row in damaged)


async def _call(method: Any, *args: Any) -> Any:
    result = method(*args)
    return await result if inspect.isawaitable(result) else result
