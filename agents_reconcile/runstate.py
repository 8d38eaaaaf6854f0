"""What a run carries: ``context["agents_reconcile"]`` in a mapping context.

``RunState.to_string()`` carries a mapping context across processes, so what is written there
survives with the state even when the journal is elsewhere: a copy of each failed intent, and
the mark of how many of the session's counted writes the run has seen.

The module functions read and write that copy and check it against the session resuming it;
they do no I/O. ``CarriedState`` is one session's use of it with its journal: adopting copies
the journal has never seen, and telling a stale state (one older than the session) by its mark.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

import orjson

from .errors import RecordError, UnsupportedRecordVersion
from .journal import IntentState
from .journal_client import UNREADABLE, JournalClient
from .ownership import current_owner
from .records import BackendIdentity, Outcome, PendingWrite, Reason
from .sealing import Keyring

__all__ = [
    "CONTEXT_KEY",
    "CONTEXT_VERSION",
    "CarriedState",
    "Refusal",
    "carried_entries",
    "check_carried",
    "context_of",
    "drop",
    "has_pending",
    "mark_seen",
    "put",
    "seen",
    "seen_key",
]

CONTEXT_KEY: Final = "agents_reconcile"
"""Key of the intent copy in a mapping run context."""
CONTEXT_VERSION: Final = 1


@dataclass(frozen=True)
class Refusal:
    """Why a carried copy cannot be used: the session denies with this as a BindingMismatch."""

    reason: Reason
    evidence: dict[str, Any] = field(default_factory=dict)
    intent: PendingWrite | None = None
    intent_id: str | None = None
    cause: BaseException | None = None


def context_of(wrapper: Any) -> MutableMapping[str, Any] | None:
    """The run's context when it is a mutable mapping (the only kind a copy can live in)."""
    context = getattr(wrapper, "context", None)
    return context if isinstance(context, MutableMapping) else None


def put(context: MutableMapping[str, Any], intent: PendingWrite) -> None:
    """Add (or replace) the copy of ``intent``."""
    carried = context.setdefault(CONTEXT_KEY, {"version": CONTEXT_VERSION, "pending": []})
    pending = carried.setdefault("pending", [])
    pending[:] = [p for p in pending if p.get("intent_id") != intent.intent_id]
    # A detached copy: the caller's context must not alias the intent's own batch.
    pending.append(orjson.loads(intent.encode()))


def drop(context: MutableMapping[str, Any], intent_id: str) -> None:
    """Remove the copy of a settled intent (and the key, once nothing is left).

    Its settlement counted one write of its session: the state's mark moves past it, so that
    the writes the state accounts for (mark plus carried intents) stay the same."""
    carried = context.get(CONTEXT_KEY)
    if not isinstance(carried, MutableMapping):
        return
    pending = carried.get("pending", [])
    kept = [
        p
        for p in pending
        if not (isinstance(p, MutableMapping) and p.get("intent_id") == intent_id)
    ]
    marks = carried.get("seen")
    if len(kept) < len(pending) and isinstance(marks, MutableMapping):
        for entry in pending:
            if isinstance(entry, MutableMapping) and entry.get("intent_id") == intent_id:
                key = seen_key(str(entry.get("session_id")), str(entry.get("backend")))
                if isinstance(marks.get(key), int):
                    marks[key] += 1
    carried["pending"] = kept
    if not kept and not marks:
        del context[CONTEXT_KEY]


def has_pending(context: MutableMapping[str, Any] | None) -> bool:
    """Whether the context carries any intent (of any session)."""
    if context is None:
        return False
    carried = context.get(CONTEXT_KEY)
    return not isinstance(carried, MutableMapping) or bool(carried.get("pending"))


def seen_key(session_id: str, backend: BackendIdentity | str) -> str:
    return f"{session_id}@{backend}"


def seen(context: MutableMapping[str, Any] | None, key: str) -> int | Refusal | None:
    """How many writes of the session the journal had counted when this run last wrote it
    (intents it still carries aside): None when the context holds no mark for it."""
    if context is None or CONTEXT_KEY not in context:
        return None
    carried = context[CONTEXT_KEY]
    if not isinstance(carried, MutableMapping) or carried.get("version") != CONTEXT_VERSION:
        version = carried.get("version") if isinstance(carried, MutableMapping) else None
        return Refusal(Reason.UNSUPPORTED_RECORD, {"context_version": str(version)})
    marks = carried.get("seen")
    if marks is None:
        return None
    mark = marks.get(key) if isinstance(marks, MutableMapping) else None
    if mark is None and isinstance(marks, MutableMapping):
        return None
    if type(mark) is not int or mark < 0:
        return Refusal(Reason.RECORD_UNTRUSTED, {"seen": type(mark).__name__})
    return mark


def mark_seen(context: MutableMapping[str, Any], key: str, writes: int) -> None:
    """Remember that the journal has counted ``writes`` writes of the session, all seen by
    this run (``RunState.to_string()`` carries the mark with the state)."""
    carried = context.get(CONTEXT_KEY)
    if not isinstance(carried, MutableMapping):
        carried = context[CONTEXT_KEY] = {"version": CONTEXT_VERSION, "pending": []}
    marks = carried.get("seen")
    if not isinstance(marks, MutableMapping):
        marks = carried["seen"] = {}
    marks[key] = writes


def carried_entries(context: MutableMapping[str, Any] | None) -> list[Any] | Refusal:
    """The raw carried entries, or why the container itself cannot be read."""
    if context is None or CONTEXT_KEY not in context:
        return []
    carried = context[CONTEXT_KEY]
    if not isinstance(carried, MutableMapping) or carried.get("version") != CONTEXT_VERSION:
        version = carried.get("version") if isinstance(carried, MutableMapping) else None
        return Refusal(Reason.UNSUPPORTED_RECORD, {"context_version": str(version)})
    entries = carried.get("pending", [])
    if not isinstance(entries, list):
        return Refusal(Reason.RECORD_UNTRUSTED, {"pending": type(entries).__name__})
    return list(entries)


def check_carried(
    raw: Any, *, session_id: str, backend: BackendIdentity, keyring: Keyring | None = None
) -> PendingWrite | Refusal | None:
    """Decode one carried entry and check it against this session and backend.

    ``None``: the entry is another session's (a context may be shared by several sessions,
    as agents used as tools share their parent's), to be left for it."""
    if not isinstance(raw, MutableMapping):
        return Refusal(Reason.RECORD_UNTRUSTED, {"entry": type(raw).__name__})
    intent_id = str(raw.get("intent_id"))
    if raw.get("session_id") != session_id and isinstance(raw.get("session_id"), str):
        # Another session's entry (perhaps sealed under its key): left for it, unread.
        return None
    try:
        intent = PendingWrite.decode(raw, keyring)
    except UnsupportedRecordVersion as exc:
        return Refusal(Reason.UNSUPPORTED_RECORD, {"error": str(exc)}, None, intent_id, exc)
    except RecordError as exc:
        return Refusal(Reason.RECORD_UNTRUSTED, {"error": str(exc)}, None, intent_id, exc)
    if intent.session_id != session_id:
        return None
    if intent.backend != backend:
        evidence = {"recorded": str(intent.backend), "current": str(backend)}
        return Refusal(Reason.BACKEND_MISMATCH, evidence, intent)
    return intent


class CarriedState:
    """One session's use of what runs carry, with its journal."""

    def __init__(self, client: JournalClient) -> None:
        self._client = client
        self.key = seen_key(client.session_id, client.backend)

    def _check(self, raw: Any) -> PendingWrite | Refusal | None:
        client = self._client
        return check_carried(
            raw, session_id=client.session_id, backend=client.backend, keyring=client.keyring
        )

    def mark(self, context: MutableMapping[str, Any] | None, count: int) -> None:
        """The run has seen the session as the journal counted ``count`` writes of it."""
        if context is not None:
            mark_seen(context, self.key, count)

    def marked(self, context: MutableMapping[str, Any] | None) -> bool:
        """Whether the run carries a mark for this session."""
        return seen(context, self.key) is not None

    async def accounted(self, context: MutableMapping[str, Any] | None) -> int | None:
        """The session's write count this run can account for: what it last saw, plus one
        settlement for each intent it still carries. None when the context has no mark.

        A journal that counted fewer writes than that is another journal than the one the
        state last wrote through (a RunState copy may be resumed anywhere): counts say
        nothing then, and the carried intents alone are checked."""
        mark = seen(context, self.key)
        if mark is None:
            return None
        if isinstance(mark, Refusal):
            await self.refuse(mark)
        carried = carried_entries(context)
        if isinstance(carried, Refusal):
            await self.refuse(carried)
        mine = sum(isinstance(self._check(raw), PendingWrite) for raw in carried)
        return mark + mine

    async def adopt(self, context: MutableMapping[str, Any] | None) -> None:
        """Check the intents a run carries against the journal, recording unknown ones.
        Copies of other sessions' intents (a context shared by several sessions) are left as
        they are, for their own session."""
        entries = carried_entries(context)
        if isinstance(entries, Refusal):
            await self.refuse(entries)
        client = self._client
        journal = client.journal
        for raw in entries:
            assert context is not None
            intent = self._check(raw)
            if intent is None:
                continue
            if isinstance(intent, Refusal):
                await self.refuse(intent)
            if await client.call(journal.is_settled, intent.intent_id):
                drop(context, intent.intent_id)
                continue
            entry = await client.call(journal.get, intent.intent_id)
            if entry is None:
                await client.call(
                    journal.record, intent, state=IntentState.FAILED, owner=current_owner()
                )
            elif not entry.intent.same_content(intent):
                evidence = {
                    "journal": entry.intent.to_mapping()["digest"],
                    "run_state": intent.to_mapping()["digest"],
                }
                await self.refuse(Refusal(Reason.COPIES_DISAGREE, evidence, intent))

    async def refuse(self, refusal: Refusal) -> NoReturn:
        """Deny, as a binding mismatch, with what a refusal found."""
        await self._client.deny(
            refusal.intent,
            Outcome.AMBIGUOUS,
            refusal.reason,
            refusal.evidence,
            intent_id=refusal.intent_id or UNREADABLE,
            binding=True,
            cause=refusal.cause,
        )
