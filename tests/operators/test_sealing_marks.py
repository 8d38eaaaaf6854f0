"""The mark of a sealed journal: every journal engine (memory, SQLite, Redis, Redis Cluster,
PostgreSQL) keeps the ids of the payload keys its deployment seals under (never the keys),
written before its first sealed record; an operator's write that would put a payload in a
journal so marked unsealed, or under a key the mark does not name (``check --repair``, an
effect's receipt), is refused with a typed error and writes nothing, even when no sealed record
is left in the journal to show it is sealed; a journal never sealed takes them as before; and
``migrate`` brings a journal sealed under an earlier release to its mark."""

from __future__ import annotations

import asyncio
import base64
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
import pytest
from agents import SQLiteSession

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.schema import Schema
from agents_reconcile._backends.sqlite.backend import SQLiteSchema
from agents_reconcile._backends.sqlite.files import SCHEMA as SQLITE_SCHEMA
from agents_reconcile._core.sealing import SESSION_KEYS, PayloadKey
from agents_reconcile._operator.check import RepairRefused, repair_session
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import Place
from ..support.journal_support import STRANGER, make_effect, make_intent
from .test_operator_cli import (
    PAYLOAD_KEY,
    SECRET,
    Case,
    case,
    cli,
    journal_holds,
    repair,
    sealing_deployment,
)

__all__ = ["case"]

KEY_ID = PayloadKey(PAYLOAD_KEY).key_id


# -- every engine keeps the mark ----------------------------------------------------------------


async def test_a_dropped_journal_drops_its_mark_too(place: Place) -> None:
    """A journal dropped and made again on the same storage is not taken for sealed."""
    journal = place.journal()
    drop = getattr(journal, "drop", None)
    if drop is None:
        pytest.skip(f"{place.backend.name} journals are not dropped")
    await journal.sealing.mark(["aaaa000000000001"])
    await drop()
    assert await place.journal().sealing.keys() == frozenset()


async def test_a_journal_never_sealed_holds_no_mark_and_marks_only_add_up(place: Place) -> None:
    """A new journal of every engine has the sealing component and holds no mark; ids added
    are kept (again is a no-op), and another journal object on the same storage reads them."""
    journal = place.journal()
    assert journal.sealing is not None
    assert await journal.sealing.keys() == frozenset()
    await journal.sealing.mark(["aaaa000000000001", "bbbb000000000002"])
    await journal.sealing.mark(["bbbb000000000002", "cccc000000000003"])
    expected = {"aaaa000000000001", "bbbb000000000002", "cccc000000000003"}
    assert await journal.sealing.keys() == expected
    if place.backend.durable:
        assert await place.journal().sealing.keys() == expected


async def test_a_session_that_seals_marks_the_journal_with_its_key_ids_only(
    place: Place, tmp_path: Path
) -> None:
    """A session with a payload key marks its journal with the key's id (not the key) before
    its first sealed intent is recorded; one without a key leaves it unmarked."""
    journal = place.journal()
    plain = ReconcilingSession(
        SQLiteSession("plain", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
    )
    await plain.add_items([{"role": "user", "content": "hi"}])
    assert await journal.sealing.keys() == frozenset()
    faulty = FaultInjectingSession(SQLiteSession("sealed", tmp_path / "chat.db"))
    sealing = ReconcilingSession(
        faulty, config=ReconcileConfig(journal=journal, payload_key=PAYLOAD_KEY)
    )
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await sealing.add_items([{"role": "user", "content": SECRET}])
    assert await journal.sealing.keys() == {KEY_ID}
    [pending] = await journal.pending("sealed")
    assert pending.intent.sealed_under == KEY_ID


async def test_a_key_derived_from_an_encrypted_session_is_marked_by_one_name(place: Place) -> None:
    """Keys derived from each session's own ``EncryptedSession`` key (one per session) are
    marked under one name, so the mark does not grow with the sessions."""
    pytest.importorskip("cryptography")
    from agents.extensions.memory import EncryptedSession

    from agents_reconcile._backends.sealing_marks import mark_sealed
    from agents_reconcile._core.sealing import Keyring

    journal = place.journal()
    for session_id in ("a", "b"):
        inner = EncryptedSession(
            session_id=session_id,
            underlying_session=SQLiteSession(session_id),
            encryption_key="k" * 40,
        )
        await mark_sealed(journal, Keyring([PayloadKey.from_encrypted_session(inner)]))
    assert await journal.sealing.keys() == {SESSION_KEYS}


# -- an operator's writes ----------------------------------------------------------------------


def _settle_bob(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    """Resolve bob's sealed intent (with the key): no sealed record is left in the journal."""
    key_file = case.directory / "payload.key"
    key_file.write_text(PAYLOAD_KEY + "\n")
    journal: Any = case.backend.open_journal(case.journal, namespace=case.space)
    journal.keyring.add([PayloadKey(PAYLOAD_KEY)])

    async def pending_id() -> str:
        try:
            [entry] = [e for e in await journal.pending(None) if e.intent.session_id == "bob"]
            return str(entry.intent.intent_id)
        finally:
            await journal.close()

    intent_id = asyncio.run(pending_id())
    abandon = ["--as", "abandon", "--reason", "bob asked again", "--payload-key-file"]
    code, out = cli(capsys, "resolve", intent_id, *abandon, str(key_file), *case.args())
    assert code == 0, out


def test_a_repair_without_the_key_is_refused_when_no_sealed_record_is_left(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bob's sealed intent resolved, the journal holds no sealed record, only its mark:
    ``check --repair`` without the deployment's key (or with another key) is refused in one
    line (exit 1) and writes nothing, store or journal; with the key it repairs, sealed."""
    sealing_deployment(case)
    _settle_bob(case, capsys)
    before = case.history("alice")
    code, out = repair(case, capsys, "--json")
    assert code == 1, out
    refused = orjson.loads(out)
    assert refused["kind"] == "RepairRefused"
    assert "marked sealed" in refused["error"] and KEY_ID in refused["error"]
    assert "nothing was written" in refused["error"]
    code, out = repair(case, capsys)
    assert code == 1 and out.startswith("refused:") and out.count("\n") == 1, out
    other = case.directory / "other.key"
    other.write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
    code, out = repair(case, capsys, "--payload-key-file", str(other))
    assert code == 1 and "is not one of them" in out, out
    assert case.history("alice") == before
    assert not journal_holds(case, SECRET)
    # The refused repairs recorded nothing: the journal still holds nothing of alice.
    code, out = cli(capsys, "trail", "alice", *case.args())
    assert code == 1 and "no session 'alice'" in out, out
    key_file = case.directory / "payload.key"
    code, out = repair(case, capsys, "--payload-key-file", str(key_file))
    assert code == 0, out
    assert case.history("alice") == [f"user:{SECRET}", "call:c1", "output:c1"]
    assert not journal_holds(case, SECRET)


def test_a_journal_never_sealed_takes_a_repair_without_a_key_as_before(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """No session ever sealed in it: ``check --repair`` without a key repairs, and leaves
    the journal unmarked."""
    call = {"type": "function_call", "call_id": "c1", "name": "charge", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": SECRET}

    async def write() -> None:
        await case.session("bob").add_items([{"role": "user", "content": "hello"}])
        alice = SQLiteSession("alice", case.store)
        await alice.add_items([{"role": "user", "content": SECRET}, call, output, call, output])

    asyncio.run(write())
    code, out = repair(case, capsys)
    assert code == 0, out
    assert case.history("alice") == [f"user:{SECRET}", "call:c1", "output:c1"]

    async def mark() -> frozenset[str]:
        journal: Any = case.backend.open_journal(case.journal, namespace=case.space)
        try:
            found: frozenset[str] = await journal.sealing.keys()
            return found
        finally:
            await journal.close()

    assert asyncio.run(mark()) == frozenset()


def test_an_effects_receipt_without_the_key_in_a_sealed_journal_is_refused(
    case: Case, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal marked sealed, an effect left started by a gone owner: ``resolve --as
    committed --output`` without the key is refused (exit 1) and its record stays as it was;
    with the key the receipt is written, sealed."""
    # Its owner's lease (1 ms, judged on the journal's clock) runs out before the resolution.
    effect = make_effect("c1", session_id="user-42", owner=str(STRANGER.leased(0.001)))

    async def prepare() -> None:
        journal: Any = case.backend.open_journal(case.journal, namespace=case.space)
        try:
            await journal.sealing.mark([KEY_ID])
            await journal.effects.begin(effect)
        finally:
            await journal.close()
        await asyncio.sleep(0.05)

    asyncio.run(prepare())
    resolve = ["resolve", effect.key, "--as", "committed", "--output", f"charged {SECRET}"]
    code, out = cli(capsys, *resolve, "--reason", "seen at the processor", *case.args())
    assert code == 1 and "marked sealed" in out and "nothing was written" in out, out
    code, out = cli(capsys, "show", effect.key, *case.args(), "--json")
    assert orjson.loads(out)["state"] == "started", out
    monkeypatch.setenv("OPS_KEY", PAYLOAD_KEY)
    keyed = ("--payload-key-env", "OPS_KEY")
    code, out = cli(capsys, *resolve, "--reason", "seen", *case.args(), *keyed)
    assert code == 0, out
    assert not journal_holds(case, SECRET)


async def test_repair_session_from_code_is_refused_without_the_key_in_a_marked_journal(
    place: Place, tmp_path: Path
) -> None:
    """The library's ``repair_session`` makes the same check: given no payload key on a
    journal marked sealed, it refuses (``RepairRefused``) and writes nothing."""
    journal = place.journal()
    await journal.sealing.mark([KEY_ID])
    call = {"type": "function_call", "call_id": "c1", "name": "charge", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": SECRET}
    store = SQLiteSession("alice", tmp_path / "chat.db")
    await store.add_items([call, output, call, output])
    with pytest.raises(RepairRefused, match="marked sealed"):
        await repair_session(store, journal=journal, reason="r")
    assert len(await store.get_items()) == 4
    assert await journal.decisions(session_id="alice") == []
    report = await repair_session(
        SQLiteSession("alice", tmp_path / "chat.db"),
        journal=place.journal(),
        reason="r",
        payload_keys=[PayloadKey(PAYLOAD_KEY)],
    )
    assert report.repaired


# -- migrating a journal sealed under an earlier release ----------------------------------------


async def test_migrate_marks_a_journal_sealed_before_the_mark_existed(
    place: Place, tmp_path: Path
) -> None:
    """A journal of the schema before the mark (its step undone) holding an intent sealed
    under a key: ``migrate`` adds the mark's step and marks the journal with that key's id,
    read from the sealed record. (The SQL engines: on Redis the mark needs no step.)"""
    if place.backend.name not in ("sqlite", "postgres"):
        pytest.skip(f"{place.backend.name}: the mark is kept without a schema step")
    journal = place.journal()
    key = PayloadKey(PAYLOAD_KEY)
    from dataclasses import replace

    from agents_reconcile._core.ownership import current_owner

    intent = replace(make_intent("sealed-1", text=SECRET), seal_key=key)
    if place.backend.name == "sqlite":
        # A file of schema 2, as that release wrote it: the intent in its intents table.
        await journal.close()  # never used: no file yet
        path = Path(place.address)
        steps = SQLITE_SCHEMA.steps[:2]
        version_2 = Schema(
            "journal", steps, SQLITE_SCHEMA.error, package=SQLITE_SCHEMA.package,
            folder=SQLITE_SCHEMA.folder,
        )  # fmt: skip
        SQLiteSchema(version_2, "journal_schema").migrate_file(path, 5.0)
        with closing(sqlite3.connect(path)) as conn, conn:
            conn.execute(
                "INSERT INTO intents (intent_id, session_id, backend, state, owner, created_at,"
                " updated_at, record) VALUES (?, ?, ?, 'failed', 'gone', 0, 0, ?)",
                (intent.intent_id, intent.session_id, str(intent.backend), intent.encode()),
            )
    else:
        # A schema of version 2, as that release wrote it: the intent in its intents table.
        await journal.close()  # never used: no schema yet
        import asyncpg

        from agents_reconcile._backends.postgres.backend import PostgresSchema
        from agents_reconcile._backends.postgres.database import SCHEMA as POSTGRES_SCHEMA

        version_2 = Schema(
            "journal", POSTGRES_SCHEMA.steps[:2], POSTGRES_SCHEMA.error,
            package=POSTGRES_SCHEMA.package, folder=POSTGRES_SCHEMA.folder,
        )  # fmt: skip
        conn = await asyncpg.connect(place.address)
        try:
            older_schema = PostgresSchema(
                version_2, place.space, version_table="schema_version", tables=(), location=""
            )
            await older_schema.apply(conn)
            await conn.execute(
                f'INSERT INTO "{place.space}".intents (intent_id, session_id, backend, state,'
                " owner, created_at, updated_at, record) VALUES ($1, $2, $3, 'failed', $4, 0, 0,"
                " $5)",
                intent.intent_id,
                intent.session_id,
                str(intent.backend),
                str(current_owner()),
                intent.encode(),
            )
        finally:
            await conn.close()
    if place.backend.name == "sqlite":
        from agents_reconcile._backends.sqlite.journal import SQLiteJournal

        older: Any = SQLiteJournal(place.address)  # not the shared object: never opened yet
    else:
        older = place.journal()
    assert "older" in (await older.check() or "")
    steps = await older.migrate()
    assert steps[0] == "journal schema 3"
    assert await older.sealing.keys() == {key.key_id}
