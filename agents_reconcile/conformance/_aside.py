"""The aside component's contracts (``JournalAside``), checked on a journal whose ``aside`` is
one; skipped, with the reason, on one whose ``aside`` is None: a damaged intent's record then
has to be cleared by other means."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .._backends.aside import RawIntent, SetAside, raw_digest
from .._backends.journal import IntentState
from .._core.records import Action, BackendIdentity, Decision, Outcome, PendingWrite, Reason
from ..errors import RecordError
from ._core import Subject, contract, fail, refused, require, skip
from ._journal import journal_of, worker
from ._records import ME, make_intent

__all__: list[str] = []


async def _aside_journal(subject: Subject) -> Any:
    journal = await journal_of(subject)
    if journal.aside is None:
        skip(
            "the journal has no aside component (journal.aside is None; a JournalAside: raw, "
            "set_aside, entries, kept): a damaged intent cannot be set aside"
        )
    return journal


async def _raw(journal: Any, intent_id: str) -> RawIntent:
    raw: RawIntent | None = await journal.aside.raw(intent_id)
    if raw is None or raw.intent_id != intent_id:
        fail(f"aside.raw({intent_id!r}) answered {raw!r} for an unresolved intent")
    return raw


def _aside(raw: RawIntent, decided_at: float) -> tuple[SetAside, Decision]:
    """What an operator's set-aside of ``raw`` stores: its description and its decision."""
    aside = SetAside.of(raw, problem="checked", actor="conformance", reason="why", at=decided_at)
    decision = Decision(
        intent_id=raw.intent_id,
        session_id=raw.session_id,
        backend=BackendIdentity.parse(raw.backend),
        outcome=Outcome.AMBIGUOUS,
        reason=Reason.OPERATOR_RESOLVED,
        action=Action.DROPPED,
        decided_at=decided_at,
        evidence={"resolution": "abandon", "actor": "conformance"},
    )
    return aside, decision


@contract("aside")
async def set_aside_moves_only_a_row_unchanged_since_read(subject: Subject) -> None:
    """``aside.set_aside()`` moves an unresolved intent's row only while it still holds exactly what
    ``aside.raw()`` read (a renewal or any change since keeps it, answering False); moved, the
    intent is settled, its decision stored and its session's count moved, once."""
    journal = await _aside_journal(subject)
    intent = make_intent("i-1")
    await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=ME)
    require(await journal.aside.raw("never") is None, "aside.raw() of an unknown id found one")
    raw = await _raw(journal, "i-1")
    await asyncio.sleep(0.02)
    await journal.transition("i-1", state=IntentState.IN_FLIGHT, owner=ME)
    stale_aside, stale_decision = _aside(raw, time.time())
    moved = await journal.aside.set_aside(raw, stale_aside, stale_decision)
    require(moved is False, "aside.set_aside() moved a row renewed since it was read")
    require(await journal.get("i-1") is not None, "a refused aside.set_aside() removed the intent")
    require(not await journal.is_settled("i-1"), "a refused aside.set_aside() settled the intent")
    require(await journal.decisions(intent_id="i-1") == [], "a refused aside.set_aside() stored")
    require(await journal.aside.entries() == [], "a refused aside.set_aside() listed an entry")
    require(await journal.write_count("session-a", intent.backend) == 1, "a refusal counted")
    fresh = await _raw(journal, "i-1")
    aside, decision = _aside(fresh, time.time())
    require(
        await journal.aside.set_aside(fresh, aside, decision) is True,
        "aside.set_aside() did not move it",
    )
    require(await journal.get("i-1") is None, "the row set aside is still an intent")
    require(await journal.is_settled("i-1"), "the intent set aside is not settled")
    require(await journal.decisions(intent_id="i-1") == [decision], "its decision is not stored")
    require(await journal.aside.entries() == [aside], "aside.entries() lacks it")
    require(await journal.write_count("session-a", intent.backend) == 2, "it was not counted")
    require(
        await journal.aside.set_aside(fresh, aside, decision) is False,
        "aside.set_aside() again (a retry) moved something",
    )
    require(await journal.write_count("session-a", intent.backend) == 2, "a retry counted")


@contract("aside")
async def set_aside_entries_are_newest_first_and_limited(subject: Subject) -> None:
    """``aside.entries()`` lists what was set aside newest first, only a session's or an
    intent's when asked, at most ``limit``, refusing a limit below 1 (``ValueError``)."""
    journal = await _aside_journal(subject)
    entries: list[SetAside] = []
    for n, session in enumerate(("session-a", "session-b", "session-a")):
        intent = make_intent(f"i-{n}", session_id=session, text=str(n))
        await journal.record(intent, state=IntentState.FAILED, owner=ME)
        raw = await _raw(journal, intent.intent_id)
        aside, decision = _aside(raw, 1_700_000_000.0 + n)
        require(
            await journal.aside.set_aside(raw, aside, decision),
            "aside.set_aside() did not move a row",
        )
        entries.append(aside)
    first, second, third = entries
    for what, filters, wanted in (
        ("aside.entries()", {}, [third, second, first]),
        ("aside.entries(session_id='session-a')", {"session_id": "session-a"}, [third, first]),
        ("aside.entries(intent_id='i-1')", {"intent_id": "i-1"}, [second]),
        ("aside.entries(limit=2)", {"limit": 2}, [third, second]),
        (
            "aside.entries(session_id='session-a', limit=1)",
            {"session_id": "session-a", "limit": 1},
            [third],
        ),
    ):
        found = await journal.aside.entries(**filters)
        names = [entry.intent_id for entry in found]
        require(found == wanted, f"{what} lists {names}, not {[e.intent_id for e in wanted]}")
    await refused(ValueError, journal.aside.entries(limit=0), "aside.entries(limit=0)")


@contract("aside")
async def aside_reads_an_intents_record_as_stored(subject: Subject) -> None:
    """``aside.raw()`` gives an unresolved intent's row with its record as the journal stored
    it, every byte (it decodes, with the journal's keyring, to the very intent recorded), and
    its columns as recorded; ``aside.entries()`` then describes those bytes (their digest and
    size) once the row is set aside: what an operator sets aside is what was there."""
    journal = await _aside_journal(subject)
    intent = make_intent("i-1", text="kept whole: " + "x" * 500)
    await journal.record(intent, state=IntentState.FAILED, owner=ME)
    raw = await _raw(journal, "i-1")
    try:
        decoded = PendingWrite.decode(raw.record, getattr(journal, "keyring", None))
    except RecordError as exc:
        fail(f"aside.raw() gives a record that does not decode ({exc}): its bytes were changed")
    require(decoded == intent, "aside.raw() gives the record of another intent")
    columns = (raw.session_id, raw.backend, raw.state, raw.owner)
    wanted = ("session-a", str(intent.backend), IntentState.FAILED.value, str(ME))
    require(columns == wanted, f"aside.raw() gives the columns {columns}, not {wanted}")
    aside, decision = _aside(raw, time.time())
    require(await journal.aside.set_aside(raw, aside, decision), "aside.set_aside() moved nothing")
    [entry] = await journal.aside.entries(intent_id="i-1")
    require(
        (entry.digest, entry.size) == (raw_digest(raw.record), len(raw.record)),
        f"the entry describes {entry.size} bytes ({entry.digest}), not the record set aside",
    )


@contract("aside")
async def set_aside_bytes_read_back_exactly(subject: Subject) -> None:
    """``aside.kept()`` gives the bytes an intent's row held when it was set aside, every one
    as ``aside.raw()`` read them (the evidence an operator checks against the entry's digest),
    from this journal object and at once from another on the same data; None for an intent
    never set aside, unresolved or unknown."""
    journal = await _aside_journal(subject)
    kept = getattr(journal.aside, "kept", None)
    if kept is None:
        fail("journal.aside has no kept(intent_id): the bytes it sets aside cannot be read back")
    intent = make_intent("i-1", text="evidence: " + "\u00e9\u2603" * 200)
    await journal.record(intent, state=IntentState.FAILED, owner=ME)
    await journal.record(
        make_intent("i-2", session_id="session-b"), state=IntentState.FAILED, owner=ME
    )
    require(await kept("i-1") is None, "aside.kept() of an intent not set aside found bytes")
    raw = await _raw(journal, "i-1")
    aside, decision = _aside(raw, time.time())
    require(await journal.aside.set_aside(raw, aside, decision), "aside.set_aside() moved nothing")
    other = await worker(subject, journal)
    for who, reader in (("this journal", journal), ("another journal object", other)):
        found = await reader.aside.kept("i-1")
        require(
            found == raw.record,
            f"aside.kept() through {who} gives "
            + ("nothing" if found is None else f"{len(found)} bytes ({raw_digest(found)})")
            + f", not the {len(raw.record)} bytes set aside ({raw_digest(raw.record)})",
        )
    require(await kept("i-2") is None, "aside.kept() of an unresolved intent found bytes")
    require(await kept("never") is None, "aside.kept() of an unknown intent found bytes")
