"""What a run carries: ``context["agents_reconcile"]`` in a mapping context.

``RunState.to_string()`` carries a mapping context across processes, so what is written there
survives with the state even when the journal is elsewhere: a copy of each failed intent, and
the session's write count the run has seen (its seen write count), and when it saw it (the
stamp by which a state older than the journal's retention is told: ``_core/retention.py``).

The module functions read and write that copy and check it against the session resuming it;
they do no I/O. ``CarriedState`` is one session's use of it with its journal: adopting copies
the journal has never seen, and telling a stale state (one older than the session) by its
seen write count.

What comes back in a context went through whoever held the state, so it is input, not memory:

- the backend is named by an opaque identity (a digest of its kind and namespace), never by
  a file path or a host;
- with a signing key (``signing``) every entry and every seen write count carries a MAC, and
  one that is missing or does not verify is refused before it is used, and never journaled;
- without one, a copy the journal has never seen is judged for this run alone: it is written
  to the journal only to replay it (claimed and settled like any other), so an edited copy can
  never leave a pending intent that blocks other runs;
- a state carries at most ``MAX_CARRIED`` entries.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import OrderedDict
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

import orjson
from blake3 import blake3

from .._backends.journal import IntentState
from .._core.records import (
    UNREADABLE,
    Action,
    BackendIdentity,
    Outcome,
    PendingWrite,
    Reason,
    new_write_id,
)
from .._core.retention import KEEP_FOREVER, Retention, expired
from .._core.sealing import Keyring
from .._core.signing import Signer
from ..errors import RecordError, UnsupportedRecordVersion
from .journal_client import JournalClient

__all__ = [
    "CONTEXT_KEY",
    "CONTEXT_VERSION",
    "FINAL_REACHED",
    "MAX_CARRIED",
    "CarriedState",
    "Refusal",
    "carried_entries",
    "check_carried",
    "drop",
    "final_output",
    "has_pending",
    "judge_live",
    "judged_live",
    "opaque_backend",
    "put",
    "record_seen",
    "seen_at",
    "seen_key",
    "seen_write_count",
    "set_final_output",
]

CONTEXT_KEY: Final = "agents_reconcile"
"""Key of the intent copy in a mapping run context."""
CONTEXT_VERSION: Final = 1
MAX_CARRIED: Final = 64
"""The most entries one state may carry; a state with more is refused unread."""
_OPAQUE_KIND: Final = "opaque"
_OPAQUE_CONTEXT: Final = "agents-reconcile 2026-12-01 backend identity in a run context"
_SIGNED_INTENT: Final = "runstate intent"
_SIGNED_SEEN: Final = "runstate seen write count"
_SIGNED_SEEN_AT: Final = "runstate seen write count and when"
_FINAL: Final = "final_output"
FINAL_REACHED: Final = "reached"
"""The run reached its final output and its save has not ended yet."""


@dataclass(frozen=True)
class Refusal:
    """Why a carried copy cannot be used: the session denies with this as a BindingMismatch."""

    reason: Reason
    evidence: dict[str, Any] = field(default_factory=dict)
    intent: PendingWrite | None = None
    intent_id: str | None = None
    cause: BaseException | None = None


def opaque_backend(backend: BackendIdentity | str) -> BackendIdentity:
    """How a run context names a backend: a digest of its kind and namespace (an identity
    already opaque stays as it is)."""
    text = str(backend)
    if text.startswith(f"{_OPAQUE_KIND}|"):
        return BackendIdentity.parse(text)
    digest = blake3(text.encode("utf-8", "surrogatepass"), derive_key_context=_OPAQUE_CONTEXT)
    return BackendIdentity(_OPAQUE_KIND, digest.hexdigest()[:32])


def put(
    context: MutableMapping[str, Any], intent: PendingWrite, signer: Signer | None = None
) -> None:
    """Add (or replace) the copy of ``intent``, naming its backend opaquely (and signed)."""
    carried = context.setdefault(CONTEXT_KEY, {"version": CONTEXT_VERSION, "pending": []})
    pending = carried.setdefault("pending", [])
    pending[:] = [p for p in pending if p.get("intent_id") != intent.intent_id]
    # A detached copy: the caller's context must not alias the intent's own batch.
    entry = orjson.loads(
        dataclasses.replace(intent, backend=opaque_backend(intent.backend)).encode()
    )
    if signer is not None:
        entry["signature"] = signer.sign(_SIGNED_INTENT, str(entry["digest"]).encode())
    pending.append(entry)


def drop(context: MutableMapping[str, Any], intent_id: str, signer: Signer | None = None) -> None:
    """Remove the copy of a settled intent (and the key, once nothing is left).

    Its settlement counted one write of its session: the state's seen write count moves past
    it, so that the writes the state accounts for (its seen write count plus carried intents)
    stay the same."""
    carried = context.get(CONTEXT_KEY)
    if not isinstance(carried, MutableMapping):
        return
    pending = carried.get("pending", [])
    kept = [
        p
        for p in pending
        if not (isinstance(p, MutableMapping) and p.get("intent_id") == intent_id)
    ]
    seen_counts = carried.get("seen_write_counts")
    if len(kept) < len(pending) and isinstance(seen_counts, MutableMapping):
        for entry in pending:
            if isinstance(entry, MutableMapping) and entry.get("intent_id") == intent_id:
                key = seen_key(str(entry.get("session_id")), str(entry.get("backend")))
                if isinstance(seen_counts.get(key), int):
                    record_seen(context, key, seen_counts[key] + 1, signer)
    carried["pending"] = kept
    if not kept and not seen_counts and not carried.get(_FINAL):
        del context[CONTEXT_KEY]


def has_pending(context: MutableMapping[str, Any] | None) -> bool:
    """Whether the context carries any intent (of any session)."""
    if context is None:
        return False
    carried = context.get(CONTEXT_KEY)
    return not isinstance(carried, MutableMapping) or bool(carried.get("pending"))


def final_output(context: MutableMapping[str, Any] | None, key: str) -> str | None:
    """Where the run stands with the session's save of its final output (``key``: the
    session's ``seen_key``): None (not reached, or saved), ``FINAL_REACHED`` (reached, its
    save not ended), or the id of the intent of its save that raised. A value that is not a
    string is read as a save that raised, its intent unknown (fail closed)."""
    carried = context.get(CONTEXT_KEY) if context is not None else None
    if not isinstance(carried, MutableMapping):
        return None
    marks = carried.get(_FINAL)
    if not isinstance(marks, MutableMapping) or key not in marks:
        return None
    value = marks[key]
    return value if isinstance(value, str) and value else UNREADABLE


def set_final_output(context: MutableMapping[str, Any], key: str, value: str | None) -> None:
    """Record (or, with None, forget) where the run stands with its final output's save."""
    carried = context.get(CONTEXT_KEY)
    if value is None:
        marks = carried.get(_FINAL) if isinstance(carried, MutableMapping) else None
        if isinstance(marks, MutableMapping):
            marks.pop(key, None)
            if not marks:
                del carried[_FINAL]  # type: ignore[union-attr]
        return
    if not isinstance(carried, MutableMapping):
        carried = context[CONTEXT_KEY] = {"version": CONTEXT_VERSION, "pending": []}
    marks = carried.get(_FINAL)
    if not isinstance(marks, MutableMapping):
        marks = carried[_FINAL] = {}
    marks[key] = value


# -- a run under way ---------------------------------------------------------------------------
#
# A state's age is judged once, when a run takes it up: a turn in progress is never refused for
# the time it takes (a slow tool, a long model call). The run's context object is marked with a
# token that this process remembers against that very object; a copy of the context (the same
# state resumed again, here or elsewhere) is another object, and is judged afresh.

_LIVE_KEY: Final = "run"
_LIVE_LIMIT: Final = 4096
_LIVE_RUNS: OrderedDict[str, int] = OrderedDict()
"""Token -> id of the context object whose state this process judged, newest last."""


def judged_live(context: MutableMapping[str, Any] | None) -> bool:
    """Whether this process judged the state of this very context object already: its run is
    under way."""
    carried = context.get(CONTEXT_KEY) if context is not None else None
    token = carried.get(_LIVE_KEY) if isinstance(carried, MutableMapping) else None
    return isinstance(token, str) and _LIVE_RUNS.get(token) == id(context)


def judge_live(context: MutableMapping[str, Any]) -> None:
    """The state this context carries was judged now: its run is under way from here."""
    carried = context.get(CONTEXT_KEY)
    if not isinstance(carried, MutableMapping):
        return  # nothing carried, nothing to judge later either
    token = new_write_id()
    carried[_LIVE_KEY] = token
    _LIVE_RUNS[token] = id(context)
    while len(_LIVE_RUNS) > _LIVE_LIMIT:
        _LIVE_RUNS.popitem(last=False)


def seen_key(session_id: str, backend: BackendIdentity | str) -> str:
    """The key of a session's seen write count: its id and its backend's opaque identity."""
    return f"{session_id}@{opaque_backend(backend)}"


def seen_write_count(
    context: MutableMapping[str, Any] | None, key: str, signer: Signer | None = None
) -> int | Refusal | None:
    """How many writes of the session the journal had counted when this run last wrote it
    (intents it still carries aside): None when the context holds no seen write count for it. With
    ``signer``, a seen write count that is unsigned or does not verify is refused."""
    if context is None or CONTEXT_KEY not in context:
        return None
    carried = context[CONTEXT_KEY]
    if not isinstance(carried, MutableMapping) or carried.get("version") != CONTEXT_VERSION:
        version = carried.get("version") if isinstance(carried, MutableMapping) else None
        return Refusal(Reason.UNSUPPORTED_RECORD, {"context_version": str(version)})
    seen_counts = carried.get("seen_write_counts")
    if seen_counts is None:
        return None
    seen_count = seen_counts.get(key) if isinstance(seen_counts, MutableMapping) else None
    if seen_count is None and isinstance(seen_counts, MutableMapping):
        return None
    if type(seen_count) is not int or seen_count < 0:
        return Refusal(Reason.RECORD_UNTRUSTED, {"seen_write_counts": type(seen_count).__name__})
    stamp = _stamp(carried, key)
    if isinstance(stamp, Refusal):
        return stamp
    if signer is not None:
        signatures = carried.get("signatures")
        signature = signatures.get(key) if isinstance(signatures, MutableMapping) else None
        # A stamped count is signed with its stamp, under a label of its own: a stamp cannot
        # be removed from a signed state (the signature would no longer verify).
        label = _SIGNED_SEEN if stamp is None else _SIGNED_SEEN_AT
        try:
            signer.verify(
                label, _seen_bytes(key, seen_count, stamp), signature, what="the seen write count"
            )
        except RecordError as exc:
            return Refusal(Reason.STATE_UNSIGNED, {"error": str(exc)}, cause=exc)
    return seen_count


def seen_at(context: MutableMapping[str, Any] | None, key: str) -> float | None:
    """When the run recorded the session's seen write count (seconds since the epoch): None
    when the context holds none, or a count without a stamp (a state from an earlier release).
    Read after ``seen_write_count``, which checks it (and its signature)."""
    carried = context.get(CONTEXT_KEY) if context is not None else None
    if not isinstance(carried, MutableMapping):
        return None
    stamp = _stamp(carried, key)
    return None if isinstance(stamp, Refusal) else stamp


def _stamp(carried: MutableMapping[str, Any], key: str) -> float | Refusal | None:
    stamps = carried.get("seen_at")
    if stamps is None:
        return None
    if not isinstance(stamps, MutableMapping):
        return Refusal(Reason.RECORD_UNTRUSTED, {"seen_at": type(stamps).__name__})
    stamp = stamps.get(key)
    if stamp is None:
        return None
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp):
        return Refusal(Reason.RECORD_UNTRUSTED, {"seen_at": type(stamp).__name__})
    return float(stamp)


def _seen_bytes(key: str, writes: int, stamp: float | None = None) -> bytes:
    text = f"{key}\x00{writes}" if stamp is None else f"{key}\x00{writes}\x00{stamp!r}"
    return text.encode("utf-8", "surrogatepass")


def record_seen(
    context: MutableMapping[str, Any], key: str, writes: int, signer: Signer | None = None
) -> None:
    """Remember that the journal has counted ``writes`` writes of the session, all seen by
    this run (``RunState.to_string()`` carries the seen_count with the state), signed with
    ``signer``."""
    carried = context.get(CONTEXT_KEY)
    if not isinstance(carried, MutableMapping):
        carried = context[CONTEXT_KEY] = {"version": CONTEXT_VERSION, "pending": []}
    seen_counts = carried.get("seen_write_counts")
    if not isinstance(seen_counts, MutableMapping):
        seen_counts = carried["seen_write_counts"] = {}
    seen_counts[key] = writes
    stamps = carried.get("seen_at")
    if not isinstance(stamps, MutableMapping):
        stamps = carried["seen_at"] = {}
    # Milliseconds: as exact as a RunState's age needs, and the same text when signed again.
    stamp = stamps[key] = round(time.time(), 3)
    signatures = carried.get("signatures")
    if signer is not None:
        if not isinstance(signatures, MutableMapping):
            signatures = carried["signatures"] = {}
        signatures[key] = signer.sign(_SIGNED_SEEN_AT, _seen_bytes(key, writes, stamp))
    elif isinstance(signatures, MutableMapping):
        signatures.pop(key, None)


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
    if len(entries) > MAX_CARRIED:
        return Refusal(Reason.STATE_TOO_LARGE, {"entries": len(entries), "limit": MAX_CARRIED})
    return list(entries)


def check_carried(
    raw: Any,
    *,
    session_id: str,
    backend: BackendIdentity,
    keyring: Keyring | None = None,
    signer: Signer | None = None,
) -> PendingWrite | Refusal | None:
    """Decode one carried entry and check it against this session and backend (and, with
    ``signer``, its signature, before anything else is read of it).

    ``None``: the entry is another session's (a context may be shared by several sessions,
    as agents used as tools share their parent's), to be left for it."""
    if not isinstance(raw, MutableMapping):
        return Refusal(Reason.RECORD_UNTRUSTED, {"entry": type(raw).__name__})
    intent_id = str(raw.get("intent_id"))
    if raw.get("session_id") != session_id and isinstance(raw.get("session_id"), str):
        # Another session's entry (perhaps sealed under its key): left for it, unread.
        return None
    body = {key: value for key, value in raw.items() if key != "signature"}
    if signer is not None:
        try:
            signer.verify(
                _SIGNED_INTENT,
                str(raw.get("digest")).encode("utf-8", "surrogatepass"),
                raw.get("signature"),
                what=f"the carried copy of intent {intent_id[:64]!r}",
            )
        except RecordError as exc:
            return Refusal(Reason.STATE_UNSIGNED, {"error": str(exc)}, None, intent_id, exc)
    try:
        intent = PendingWrite.decode(body, keyring)
    except UnsupportedRecordVersion as exc:
        return Refusal(Reason.UNSUPPORTED_RECORD, {"error": str(exc)}, None, intent_id, exc)
    except RecordError as exc:
        return Refusal(Reason.RECORD_UNTRUSTED, {"error": str(exc)}, None, intent_id, exc)
    if intent.session_id != session_id:
        return None
    if intent.backend == opaque_backend(backend):
        # The copy names the backend opaquely: the intent itself names it as the journal does.
        return dataclasses.replace(intent, backend=backend)
    if intent.backend != backend:
        evidence = {"recorded": str(intent.backend), "current": str(opaque_backend(backend))}
        return Refusal(Reason.BACKEND_MISMATCH, evidence, intent)
    return intent


class CarriedState:
    """One session's use of what runs carry, with its journal (and its signer, if any)."""

    def __init__(self, client: JournalClient, signer: Signer | None = None) -> None:
        self._client = client
        self.signer = signer
        self.key = seen_key(client.session_id, client.backend)
        retention = client.config.retention
        self.retention: Retention = KEEP_FOREVER if retention is None else retention

    async def refuse_if_expired(self, context: MutableMapping[str, Any] | None) -> None:
        """Refuse a state whose seen write count of this session was stamped longer ago than
        the retention keeps what it would be checked against (``RunStateExpired``). A state
        without a stamp (from an earlier release) is checked on counts alone."""
        if self.retention.keeps_everything or context is None:
            return
        # Checked (and, with a signer, verified with its stamp) before the stamp is believed.
        counted = seen_write_count(context, self.key, self.signer)
        if isinstance(counted, Refusal):
            await self.refuse(counted)
        await self._refuse_stamped_older(context)

    async def _refuse_stamped_older(self, context: MutableMapping[str, Any]) -> None:
        """``refuse_if_expired`` once the seen write count was checked."""
        if self.retention.keeps_everything or judged_live(context):
            return
        stamp = seen_at(context, self.key)
        if stamp is not None:
            await self._refuse_older(stamp, "seen_at")
        judge_live(context)

    async def _refuse_older(
        self, stamp: float, what: str, intent: PendingWrite | None = None
    ) -> None:
        now = time.time()
        if expired(stamp, now, self.retention):
            limit = self.retention.runstates
            assert limit is not None
            evidence = {
                what: stamp,
                "age_seconds": round(now - stamp, 3),
                "retention_seconds": limit.total_seconds(),
            }
            await self.refuse(Refusal(Reason.RUNSTATE_EXPIRED, evidence, intent))

    def _check(self, raw: Any) -> PendingWrite | Refusal | None:
        client = self._client
        return check_carried(
            raw,
            session_id=client.session_id,
            backend=client.backend,
            keyring=client.keyring,
            signer=self.signer,
        )

    def put(self, context: MutableMapping[str, Any], intent: PendingWrite) -> None:
        """Carry a copy of ``intent`` (signed, with a signer), an append that raised. When the
        run had reached its final output, this is that output's save: the state remembers it."""
        put(context, intent, self.signer)
        if final_output(context, self.key) == FINAL_REACHED:
            set_final_output(context, self.key, intent.intent_id)

    # -- the run's final output ---------------------------------------------------------------
    #
    # A run ends with the save of its final output. When that save raises, the run's state is
    # at its end: resuming it would ask the model again and store a second answer next to the
    # first (which the settlement of the save stores once). The state remembers the save
    # (``final_output``) so that the gate refuses such a resume itself, whatever the SDK does.

    def final_reached(self, context: MutableMapping[str, Any] | None) -> None:
        """The run reached its final output (its save comes next)."""
        if context is not None:
            set_final_output(context, self.key, FINAL_REACHED)

    def saved(self, context: MutableMapping[str, Any] | None) -> None:
        """An append of the run ended well: a final output reached is saved now."""
        if context is not None and final_output(context, self.key) == FINAL_REACHED:
            set_final_output(context, self.key, None)

    def finished(self, context: MutableMapping[str, Any] | None) -> str | None:
        """The final output's save that raised, if the run's state ended there (its intent's
        id, ``UNREADABLE`` when the mark is damaged). A mark of a final output reached and
        never saved (a run that had nothing to save) is forgotten: a model call means a run
        goes on."""
        found = final_output(context, self.key)
        if found == FINAL_REACHED:
            assert context is not None
            set_final_output(context, self.key, None)
            return None
        return found

    def drop(self, context: MutableMapping[str, Any], intent_id: str) -> None:
        """Carry no more the copy of a settled intent."""
        drop(context, intent_id, self.signer)

    def record_seen(self, context: MutableMapping[str, Any] | None, count: int) -> None:
        """The run has seen the session as the journal counted ``count`` writes of it."""
        if context is not None:
            record_seen(context, self.key, count, self.signer)

    def has_seen(self, context: MutableMapping[str, Any] | None) -> bool:
        """Whether the run carries a seen_count for this session."""
        return seen_write_count(context, self.key) is not None

    async def seen_write_count(self, context: MutableMapping[str, Any] | None) -> int | None:
        """The session's write count this run can account for: what it last saw, plus one
        settlement for each intent it still carries. None when the context has no seen_count.

        A journal that counted fewer writes than that is another journal than the one the
        state last wrote through (a RunState copy may be resumed anywhere): counts say
        nothing then, and the carried intents alone are checked."""
        seen_count = seen_write_count(context, self.key, self.signer)
        if seen_count is None:
            return None
        if isinstance(seen_count, Refusal):
            await self.refuse(seen_count)
        assert context is not None  # a seen write count was found in it
        await self._refuse_stamped_older(context)
        carried = carried_entries(context)
        if isinstance(carried, Refusal):
            await self.refuse(carried)
        mine = 0
        for raw in carried:
            checked = self._check(raw)
            if isinstance(checked, Refusal) and checked.reason is Reason.STATE_UNSIGNED:
                await self.refuse(checked)
            mine += isinstance(checked, PendingWrite)
        return seen_count + mine

    async def adopt(self, context: MutableMapping[str, Any] | None) -> list[PendingWrite]:
        """Check the intents a run carries against the journal. Return those the journal has
        never seen and that no signature vouches for (no signer is configured): they are to
        be judged for this run alone. A signed one is recorded in the journal. Copies of
        other sessions' intents (a context shared by several sessions) are left as they
        are, for their own session."""
        entries = carried_entries(context)
        if isinstance(entries, Refusal):
            await self.refuse(entries)
        # A run under way had what it carries judged when it took its state up.
        under_way = judged_live(context)
        if entries:
            await self.refuse_if_expired(context)
        client = self._client
        journal = client.journal
        # Every entry is checked (and, with a signer, verified) before any is acted on: a
        # state holding one bad entry writes nothing.
        intents: list[PendingWrite] = []
        for raw in entries:
            intent = self._check(raw)
            if intent is None:
                continue
            if isinstance(intent, Refusal):
                await self.refuse(intent)
            intents.append(intent)
        unverified: list[PendingWrite] = []
        for intent in intents:
            assert context is not None
            if await client.call(journal.is_settled, intent.intent_id):
                await self._refuse_if_abandoned(intent)
                self.drop(context, intent.intent_id)
                continue
            entry = await client.call(journal.get, intent.intent_id)
            if entry is None:
                # Neither settled nor unresolved here: its decision may have been pruned.
                if not under_way:
                    await self._refuse_older(intent.created_at, "intent_created_at", intent)
                if self.signer is None:
                    unverified.append(intent)
                    continue
                await client.call(
                    journal.record, intent, state=IntentState.FAILED, owner=client.owner
                )
            elif not entry.intent.same_content(intent):
                evidence = {
                    "journal": entry.intent.to_mapping()["digest"],
                    "run_state": intent.to_mapping()["digest"],
                }
                await self.refuse(Refusal(Reason.COPIES_DISAGREE, evidence, intent))
        return unverified

    async def _refuse_if_abandoned(self, intent: PendingWrite) -> None:
        """A copy of an intent an operator abandoned, or that the store refused outright, is
        refused, never dropped as settled: the run carrying it would go on from a batch that
        was dropped (and the SDK's own record of the pending write would append it again)."""
        client = self._client
        decisions = await client.call(
            client.journal.decisions, intent_id=intent.intent_id, limit=20
        )
        for decision in decisions:
            if not decision.settled or decision.action is not Action.DROPPED:
                continue
            if decision.reason is Reason.WRITE_REFUSED:
                kept = ("landed", "refused", "dropped", "status", "code")
                await client.deny(
                    intent,
                    decision.outcome,
                    Reason.WRITE_REFUSED,
                    {
                        "refused_at": decision.decided_at,
                        **{k: decision.evidence[k] for k in kept if k in decision.evidence},
                    },
                )
            if decision.reason is Reason.OPERATOR_RESOLVED:
                evidence = decision.evidence
                await client.deny(
                    intent,
                    decision.outcome,
                    Reason.ABANDONED,
                    {
                        "resolution": "abandon",
                        "resolved_at": decision.decided_at,
                        **{k: evidence[k] for k in ("actor", "operator_reason") if k in evidence},
                    },
                )

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
