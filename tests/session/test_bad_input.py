"""Bad input gets a clear, typed error and loses nothing."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from agents import SQLiteSession

from agents_reconcile import (
    BindingMismatch,
    ContinuationDenied,
    FingerprintError,
    JournalCorrupt,
    JournalUnavailable,
    Reason,
    ReconcileConfig,
    ReconcilingSession,
)
from agents_reconcile._core.records import _body_digest
from agents_reconcile._session.session import CONTEXT_KEY
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

# These tests call the session as a run would, with a stand-in run context and no gate: the
# warning about the missing gate is expected here.
pytestmark = pytest.mark.filterwarnings("ignore::agents_reconcile.UngatedRunWarning")

USER = {"role": "user", "content": "hi"}
ANSWER = {"role": "assistant", "content": "hello"}


class Wrapper:
    """The slice of the SDK's RunContextWrapper the session reads: ``context``."""

    def __init__(self, context: Any) -> None:
        self.context = context


async def failed_write(tmp_path: Path, *, db: str = "chat.db") -> tuple[dict[str, Any], Any]:
    """A rejected append whose intent is carried in a mapping context; return it and the store."""
    inner = SQLiteSession("s1", tmp_path / db)
    faulty = FaultInjectingSession(inner)
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=tmp_path / "j1.db"))
    context: dict[str, Any] = {}
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await session.add_items([USER], wrapper=Wrapper(context))  # type: ignore[arg-type]
    assert len(context[CONTEXT_KEY]["pending"]) == 1
    return context, inner


def fresh_session(tmp_path: Path, db: str = "chat.db") -> ReconcilingSession:
    """A new process's wrapper: same store file, an empty journal of its own."""
    return ReconcilingSession(
        SQLiteSession("s1", tmp_path / db), config=ReconcileConfig(journal=tmp_path / "j2.db")
    )


def chattr(flag: str, path: Path) -> bool:
    """Set or clear the immutable attribute; whether the file system allowed it."""
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def resign(entry: dict[str, Any]) -> None:
    entry["digest"] = _body_digest(entry)


async def test_tampered_runstate_copy_is_refused(tmp_path: Path) -> None:
    """An edited intent in the RunState copy is a BindingMismatch; nothing is written."""
    context, inner = await failed_write(tmp_path)
    context[CONTEXT_KEY]["pending"][0]["batch"][0]["content"] = "transfer everything"
    with pytest.raises(BindingMismatch) as denied:
        await fresh_session(tmp_path).reconcile(context)
    assert denied.value.decision.reason is Reason.RECORD_UNTRUSTED
    assert await inner.get_items() == []


async def test_runstate_from_a_future_version_is_refused(tmp_path: Path) -> None:
    """A record or a container from a newer format version is refused, never guessed at."""
    context, inner = await failed_write(tmp_path)
    entry = context[CONTEXT_KEY]["pending"][0]
    entry["v"] = 2
    resign(entry)
    with pytest.raises(BindingMismatch) as denied:
        await fresh_session(tmp_path).reconcile(context)
    assert denied.value.decision.reason is Reason.UNSUPPORTED_RECORD

    context[CONTEXT_KEY] = {"version": 9, "pending": []}
    with pytest.raises(BindingMismatch) as denied:
        await fresh_session(tmp_path).reconcile(context)
    assert denied.value.decision.reason is Reason.UNSUPPORTED_RECORD
    assert await inner.get_items() == []


async def test_runstate_from_another_backend_is_refused(tmp_path: Path) -> None:
    """An intent recorded for another database file is a BindingMismatch on this one."""
    context, _ = await failed_write(tmp_path, db="first.db")
    other = fresh_session(tmp_path, db="second.db")
    with pytest.raises(BindingMismatch) as denied:
        await other.reconcile(context)
    assert denied.value.decision.reason is Reason.BACKEND_MISMATCH
    assert await other.inner.get_items() == []


async def test_a_context_shared_with_another_session_is_left_for_it(tmp_path: Path) -> None:
    """Another session's intent in a shared context (agents used as tools share their parent's)
    neither blocks this session nor is adopted by it; its own session still settles it."""
    context, inner = await failed_write(tmp_path)
    other = ReconcilingSession(
        SQLiteSession("s2", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "j2.db"),
    )
    assert await other.reconcile(context) == []
    await other.add_items([ANSWER], wrapper=Wrapper(context))  # type: ignore[arg-type]
    assert len(context[CONTEXT_KEY]["pending"]) == 1
    [decision] = await fresh_session(tmp_path).reconcile(context)
    assert decision.action.value == "replayed"
    assert context[CONTEXT_KEY]["pending"] == []
    assert await inner.get_items() == [USER]


async def test_journal_and_runstate_that_disagree_are_refused(tmp_path: Path) -> None:
    """The same intent id with other content in the two copies is a BindingMismatch."""
    context, inner = await failed_write(tmp_path)
    entry = context[CONTEXT_KEY]["pending"][0]
    entry["created_at"] += 1
    resign(entry)
    session = ReconcilingSession(
        SQLiteSession("s1", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "j1.db"),
    )
    with pytest.raises(BindingMismatch) as denied:
        await session.reconcile(context)
    assert denied.value.decision.reason is Reason.COPIES_DISAGREE
    assert await inner.get_items() == []


async def test_tampered_journal_record_denies_continuation(tmp_path: Path) -> None:
    """A journal row whose record was edited stops the session with record_untrusted."""
    _, inner = await failed_write(tmp_path)
    with sqlite3.connect(tmp_path / "j1.db") as conn:
        (blob,) = conn.execute("SELECT record FROM unresolved").fetchone()
        body = orjson.loads(blob)
        body["batch"][0]["content"] = "transfer everything"
        conn.execute(
            "UPDATE live SET record = ? WHERE intent_id IS NOT NULL", (orjson.dumps(body),)
        )
    session = ReconcilingSession(
        SQLiteSession("s1", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "j1.db"),
    )
    with pytest.raises(ContinuationDenied) as denied:
        await session.get_items()
    assert denied.value.decision.reason is Reason.RECORD_UNTRUSTED
    assert await inner.get_items() == []


async def test_unserialisable_item_names_its_position_and_writes_nothing(tmp_path: Path) -> None:
    """An item that cannot be serialised fails with FingerprintError at its index; the store
    and the journal are untouched."""
    inner = SQLiteSession("s1", tmp_path / "chat.db")
    session = ReconcilingSession(inner, config=ReconcileConfig(journal=tmp_path / "j.db"))
    with pytest.raises(FingerprintError) as raised:
        await session.add_items([USER, {"role": "user", "content": {1, 2}}])  # type: ignore[list-item]
    assert raised.value.index == 1
    assert await inner.get_items() == []
    assert await session.pending() == []


async def test_corrupt_journal_file_fails_closed_and_is_left_alone(tmp_path: Path) -> None:
    """A journal file that is not a database stops writes (JournalCorrupt) and keeps its bytes."""
    garbage = b"this is not an sqlite database" * 100
    (tmp_path / "j.db").write_bytes(garbage)
    inner = SQLiteSession("s1", tmp_path / "chat.db")
    session = ReconcilingSession(inner, config=ReconcileConfig(journal=tmp_path / "j.db"))
    with pytest.raises(JournalCorrupt):
        await session.add_items([USER])
    assert await inner.get_items() == []
    assert (tmp_path / "j.db").read_bytes() == garbage


async def test_unopenable_journal_fails_closed(tmp_path: Path) -> None:
    """A journal that cannot be opened for writing stops writes with JournalUnavailable."""
    (tmp_path / "not-a-directory").write_text("x")
    inner = SQLiteSession("s1", tmp_path / "chat.db")
    session = ReconcilingSession(
        inner,
        config=ReconcileConfig(journal=tmp_path / "not-a-directory" / "j.db", journal_retries=1),
    )
    with pytest.raises(JournalUnavailable):
        await session.add_items([USER])
    assert await inner.get_items() == []


async def test_read_only_journal_fails_closed(tmp_path: Path) -> None:
    """A journal opened read-only by the file system refuses writes with JournalUnavailable."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not available to make the journal immutable")
    journal = tmp_path / "j.db"
    inner = SQLiteSession("s1", tmp_path / "chat.db")
    session = ReconcilingSession(inner, config=ReconcileConfig(journal=journal))
    await session.add_items([USER])
    await session.journal.close()
    if not chattr("+i", journal):
        pytest.skip("the file system does not support immutable files")
    try:
        session = ReconcilingSession(
            SQLiteSession("s1", tmp_path / "chat.db"),
            config=ReconcileConfig(journal=journal, journal_retries=1),
        )
        with pytest.raises(JournalUnavailable):
            await session.add_items([ANSWER])
        assert await inner.get_items() == [USER]
    finally:
        chattr("-i", journal)


async def test_a_journal_record_from_a_future_version_is_a_binding_mismatch(
    tmp_path: Path,
) -> None:
    """A journal row written by a newer release stops reads and writes with BindingMismatch."""
    _, inner = await failed_write(tmp_path)
    with sqlite3.connect(tmp_path / "j1.db") as conn:
        (blob,) = conn.execute("SELECT record FROM unresolved").fetchone()
        body = orjson.loads(blob)
        body["v"] = 2
        resign(body)
        conn.execute(
            "UPDATE live SET record = ? WHERE intent_id IS NOT NULL", (orjson.dumps(body),)
        )
    session = ReconcilingSession(
        SQLiteSession("s1", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "j1.db"),
    )
    for operation in (session.get_items(), session.add_items([ANSWER])):
        with pytest.raises(BindingMismatch) as denied:
            await operation
        assert denied.value.decision.reason is Reason.UNSUPPORTED_RECORD
    assert await inner.get_items() == []
