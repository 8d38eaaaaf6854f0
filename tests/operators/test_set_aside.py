"""A damaged journal entry is cleared with its evidence kept, on every journal (SQLite, Redis,
PostgreSQL, each in a namespace of its own): one edited byte in an intent's record blocks its
session; ``status`` points at ``show``, ``show`` prints the one resolution that clears it,
that line run as printed sets the record aside (its bytes kept, listed by ``show`` and
``trail`` with digest, size and why; ``show`` checks the bytes held against them, never
printing them), and the session runs again through the real runner.
From code, ``ReconcilingSession.resolve(..., "abandon")`` does the same; nothing else is
taken, and a live owner's row is not touched."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

import orjson
import pytest
from agents import SQLiteSession
from agents.testing import assistant_message

from agents_reconcile import ContinuationDenied, ReconcilingSession, ResolutionRefused
from agents_reconcile._backends.aside import raw_digest
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._core.ownership import Owner
from agents_reconcile.errors import RecordError
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import storage
from ..support.runner_support import first_run_steps, run
from .test_operator_cli import PROG, SECRET, Case, case, cli, filled, next_run

__all__ = ["case"]


def failed_write(case: Case) -> str:
    """A run whose tool turn's save fails (rejected): one failed intent. Its id."""

    async def go() -> str:
        faulty = FaultInjectingSession(SQLiteSession("user-42", case.store))
        session = ReconcilingSession(faulty, config=case.config())
        faulty.plan(Fault.REJECT, at=2)
        with pytest.raises(BackendFailure):
            await run(case.agent(first_run_steps()), f"hi {SECRET}", session, streamed=False)
        [pending] = await session.pending()
        return pending.intent_id

    return asyncio.run(go())


def damage(case: Case, intent_id: str) -> bytes:
    """Edit one byte inside the intent's stored record (its digest no longer matches)."""

    async def go() -> bytes:
        raw = storage(case.backend, case.journal, case.space)
        record = await raw.intent_record("user-42", intent_id)
        at = record.index(b'"created_at"') + len(b'"created_at":') + 1
        edited = record[:at] + bytes([record[at] ^ 1]) + record[at + 1 :]
        await raw.replace_intent_record("user-42", intent_id, edited)
        return edited

    return asyncio.run(go())


def test_a_damaged_entry_is_set_aside_with_its_evidence_kept_and_the_session_runs_again(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    intent_id = failed_write(case)
    edited = damage(case, intent_id)

    async def blocked() -> None:
        session = case.session()
        with pytest.raises((ContinuationDenied, RecordError)):
            await run(case.agent([[assistant_message("ok")]]), "next", session, streamed=False)

    asyncio.run(blocked())

    code, out = cli(capsys, "status", *case.args())
    assert code == 1 and f"DAMAGED intent {intent_id}" in out, out
    [show] = [line.strip() for line in out.splitlines() if line.strip().startswith(f"{PROG} show")]
    code, shown = cli(capsys, *shlex.split(show)[1:])
    assert code == 0, shown
    assert "DAMAGED" in shown and f"{len(edited)} bytes" in shown and raw_digest(edited) in shown
    [resolve] = [line.strip() for line in shown.splitlines() if f"{PROG} resolve" in line]
    assert "--as abandon" in resolve
    refused, said = cli(capsys, *shlex.split(filled(resolve.replace("abandon", "committed")))[1:])
    assert refused == 1 and "damaged" in said, "only abandon clears a damaged record"

    code, done = cli(capsys, *shlex.split(filled(resolve))[1:])
    assert code == 0, done
    assert cli(capsys, "status", *case.args())[0] == 0

    code, out = cli(capsys, "trail", "user-42", *case.args(), "--json")
    found = orjson.loads(out)
    [aside] = found["set_aside"]
    assert (aside["intent_id"], aside["digest"], aside["size"]) == (
        intent_id,
        raw_digest(edited),
        len(edited),
    )
    assert "digest" in aside["problem"] and aside["reason"] == "ticket 12"
    assert found["decisions"][-1]["evidence"]["set_aside"]["digest"] == raw_digest(edited)
    code, out = cli(capsys, "show", intent_id[:10], *case.args())
    assert code == 0 and f"SET ASIDE intent {intent_id}" in out, out
    held = f"bytes    held, {len(edited)} bytes, {raw_digest(edited)}: as the entry describes them"
    assert held in out and SECRET not in out, out
    code, out = cli(capsys, "show", intent_id[:10], *case.args(), "--json")
    assert orjson.loads(out)["kept"] == {
        "held": True,
        "size": len(edited),
        "digest": raw_digest(edited),
        "intact": True,
    }
    assert SECRET not in out, out

    async def kept() -> Any:
        journal = case.backend.open_journal(case.journal, namespace=case.space)
        try:
            return await journal.aside.entries(intent_id=intent_id), await journal.aside.kept(
                intent_id
            )
        finally:
            await journal.close()

    [entry], record = asyncio.run(kept())
    assert entry.digest == raw_digest(edited) and record == edited
    next_run(case)
    assert case.history()[-2:] == ["user:next", "assistant:ok"]


def test_a_damaged_entry_is_set_aside_from_code_and_nothing_else_clears_it(
    case: Case,
) -> None:
    intent_id = failed_write(case)
    edited = damage(case, intent_id)

    async def go() -> None:
        session = case.session()
        for other in ("committed", "replay"):
            with pytest.raises(ResolutionRefused, match="damaged"):
                await session.resolve(intent_id, other, reason="looked")
        decision = await session.resolve(intent_id, "abandon", reason="disk fault", actor="ops")
        assert decision.evidence["set_aside"]["digest"] == raw_digest(edited)
        assert decision.evidence["actor"] == "ops"
        assert await session.pending() == []
        await run(case.agent([[assistant_message("ok")]]), "next", session, streamed=True)

    asyncio.run(go())
    assert case.history()[-1] == "assistant:ok"


def test_a_damaged_entry_under_a_live_owner_is_not_set_aside(
    case: Case, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A row in flight under a worker on another host within its lease is that worker's: the
    operator is told to wait, and the row stays as it was."""
    intent_id = failed_write(case)

    async def hand_over() -> None:
        journal = case.backend.open_journal(case.journal, namespace=case.space)
        try:
            owner = Owner(host="another-host", pid=7, started="1", lease=30.0)
            moved = await journal.transition(intent_id, state=IntentState.IN_FLIGHT, owner=owner)
            assert moved
        finally:
            await journal.close()

    asyncio.run(hand_over())
    edited = damage(case, intent_id)
    argv = ["resolve", intent_id, *case.args(), "--as", "abandon", "--reason", "r"]
    code, out = cli(capsys, *argv)
    assert code == 1 and "live owner" in out, out

    async def still() -> bytes:
        return await storage(case.backend, case.journal, case.space).intent_record(
            "user-42", intent_id
        )

    assert asyncio.run(still()) == edited


def test_a_record_signed_under_a_key_not_given_is_not_set_aside(
    case: Case, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sound record signed under the deployment's key looks unsigned to a command given
    another key (a rotation, another deployment's variable): never damage to drop."""
    import base64

    signing = base64.b64encode(b"the-deployments-signing-key-material!").decode()
    monkeypatch.setenv("AGENTS_RECONCILE_SIGNING_KEY", signing)

    async def go() -> str:
        faulty = FaultInjectingSession(SQLiteSession("user-42", case.store))
        session = ReconcilingSession(faulty, config=case.config(signing_key=signing))
        faulty.plan(Fault.REJECT, at=2)
        with pytest.raises(BackendFailure):
            await run(case.agent(first_run_steps()), f"hi {SECRET}", session, streamed=False)
        [pending] = await session.pending()
        return pending.intent_id

    intent_id = asyncio.run(go())
    other = base64.b64encode(b"another-deployments-signing-key-here!!").decode()
    monkeypatch.setenv("AGENTS_RECONCILE_SIGNING_KEY", other)
    code, out = cli(capsys, "resolve", intent_id, *case.args(), "--as", "abandon", "--reason", "r")
    assert code == 1 and "not known to be damaged" in out, out

    async def still_pending() -> int:
        journal = case.backend.open_journal(case.journal, namespace=case.space)
        try:
            return len(await journal.pending("user-42"))
        finally:
            await journal.close()

    assert asyncio.run(still_pending()) == 1


def test_a_row_renewed_after_it_was_read_is_not_set_aside(case: Case) -> None:
    """The move compares what was read, the update time included: an owner that renewed its
    lease since keeps its row."""
    intent_id = failed_write(case)
    damage(case, intent_id)

    async def go() -> None:
        journal = case.backend.open_journal(case.journal, namespace=case.space)
        try:
            raw = await journal.aside.raw(intent_id)
            assert raw is not None
            await asyncio.sleep(0.01)
            owner = Owner.parse(raw.owner)
            assert await journal.transition(intent_id, state=IntentState(raw.state), owner=owner), (
                "a renewal: the same state and owner, a new time"
            )
            from agents_reconcile._backends.aside import SetAside
            from agents_reconcile._core.records import Action, Decision, Outcome, Reason
            from agents_reconcile._session.setting_aside import row_backend

            aside = SetAside.of(raw, problem="p", actor="a", reason="r", at=0.0)
            decision = Decision(
                intent_id,
                raw.session_id,
                row_backend(raw),
                Outcome.AMBIGUOUS,
                Reason.OPERATOR_RESOLVED,
                Action.DROPPED,
                0.0,
            )
            assert not await journal.aside.set_aside(raw, aside, decision)
            assert await journal.aside.raw(intent_id) is not None
        finally:
            await journal.close()

    asyncio.run(go())
