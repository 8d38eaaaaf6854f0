"""Behaviour specific to the embedded SQLite journal: durability, WAL, damage, locks,
addresses and fork safety. What every journal does (the contracts of
``agents_reconcile.conformance``; edited records, a newer schema, closing and opening again,
a journal object given to ``open_journal``) is in ``test_conformance.py`` and
``test_journal.py``."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from agents_reconcile._backends.journal import IntentJournal, IntentState, Opened
from agents_reconcile._backends.opening import open_journal
from agents_reconcile._backends.schema import Schema
from agents_reconcile._backends.sqlite.backend import SQLiteSchema
from agents_reconcile._backends.sqlite.journal import SCHEMA, SCHEMA_VERSION, SQLiteJournal
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.records import Action
from agents_reconcile._session.config import ReconcileConfig
from agents_reconcile.errors import (
    ConfigurationError,
    JournalCorrupt,
    JournalUnavailable,
    RecordTampered,
)

from ..support.journal_support import BACKEND, STRANGER, make_decision, make_intent

pytestmark = pytest.mark.sqlite


def query(path: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    """Run one statement on the file through a separate plain sqlite3 connection."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


@contextmanager
def write_lock_held(path: Path, seconds: float) -> Iterator[threading.Thread]:
    """Hold the file's write lock (BEGIN IMMEDIATE) from another connection for ``seconds``."""
    taken = threading.Event()
    failure: list[BaseException] = []

    def hold() -> None:
        try:
            conn = sqlite3.connect(path, isolation_level=None, timeout=5)
            try:
                conn.execute("BEGIN IMMEDIATE")
                taken.set()
                time.sleep(seconds)
                conn.execute("COMMIT")
            finally:
                conn.close()
        except BaseException as exc:
            failure.append(exc)
            taken.set()

    holder = threading.Thread(target=hold, name="lock-holder", daemon=True)
    holder.start()
    assert taken.wait(5), "the lock holder never took the lock"
    assert not failure, failure
    try:
        yield holder
    finally:
        holder.join(10)
        assert not failure, failure


class Ticker:
    """Counts how often the event loop gets to run a task that sleeps 10 ms at a time."""

    def __init__(self) -> None:
        self.stamps: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            self.stamps.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def __aenter__(self) -> Ticker:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self.stamps.append(time.monotonic())
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    @property
    def longest_gap(self) -> float:
        return max(b - a for a, b in zip(self.stamps, self.stamps[1:], strict=False))


@pytest.fixture
async def journal(tmp_path: Path) -> AsyncIterator[SQLiteJournal]:
    """A journal on a fresh file, already created on disk."""
    instance = SQLiteJournal(tmp_path / "journal.db")
    assert await instance.pending("warm-up") == []
    yield instance
    await instance.close()


# -- durability and schema ------------------------------------------------------------------


async def test_data_survives_reopening(tmp_path: Path) -> None:
    """Intents, their states and owners, and decisions are read back by a fresh instance on the
    same file after the first one closed."""
    path = tmp_path / "journal.db"
    first = SQLiteJournal(path)
    kept, settled = make_intent("kept"), make_intent("settled", text="gone")
    await first.record(kept, state=IntentState.IN_FLIGHT, owner=current_owner())
    await first.record(settled, state=IntentState.FAILED, owner=current_owner())
    assert await first.transition("kept", state=IntentState.CANCELLED, owner=STRANGER)
    denial = make_decision(kept, action=Action.DENIED)
    settlement = make_decision(settled)
    await first.note(denial)
    await first.settle(settlement)
    await first.close()

    second = SQLiteJournal(path)
    try:
        entries = await second.pending("session-a")
        assert [e.intent for e in entries] == [kept]
        assert (entries[0].state, entries[0].owner) == (IntentState.CANCELLED, STRANGER)
        assert await second.is_settled("settled")
        assert not await second.is_settled("kept")
        assert await second.decisions() == [settlement, denial]
    finally:
        await second.close()


async def test_file_is_wal_with_schema_version(journal: SQLiteJournal) -> None:
    """The journal file is in WAL mode and records each schema step exactly once, up to
    SCHEMA_VERSION, even after being reopened."""
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    reopened = SQLiteJournal(journal.path)
    try:
        await reopened.pending("session-a")
        assert await reopened.schema_version() == SCHEMA_VERSION
    finally:
        await reopened.close()

    assert query(journal.path, "PRAGMA journal_mode") == [("wal",)]
    assert query(journal.path, "SELECT version FROM journal_schema ORDER BY version") == [
        (version,) for version in range(1, SCHEMA_VERSION + 1)
    ]
    assert await journal.schema_version() == SCHEMA_VERSION


async def test_not_a_database_is_corrupt_and_left_untouched(tmp_path: Path) -> None:
    """A file of random bytes raises JournalCorrupt on first use and keeps its bytes."""
    path = tmp_path / "journal.db"
    garbage = b"not sqlite" + os.urandom(8182)
    path.write_bytes(garbage)

    journal = SQLiteJournal(path)
    with pytest.raises(JournalCorrupt):
        await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    with pytest.raises(JournalCorrupt):
        await journal.pending("session-a")
    await journal.close()

    assert path.read_bytes() == garbage


def unopenable_path(tmp_path: Path, where: str) -> Path:
    """A journal path whose file cannot be created, even by root."""
    if where == "under_regular_file":
        blocker = tmp_path / "plain-file"
        blocker.write_text("I am not a directory")
        return blocker / "journal.db"
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc on this platform")
    return Path("/proc/self/agents-reconcile-journal.db")


@pytest.mark.parametrize("where", ["under_regular_file", "under_proc"])
async def test_unopenable_path_is_unavailable(tmp_path: Path, where: str) -> None:
    """A path where no file can be created raises JournalUnavailable, not a raw sqlite3 error."""
    journal = SQLiteJournal(unopenable_path(tmp_path, where))
    with pytest.raises(JournalUnavailable):
        await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    await journal.close()


@contextmanager
def read_only(path: Path, *, with_directory: bool) -> Iterator[None]:
    """Make ``path`` (and, if asked, its directory) unwritable in a way that binds this user.

    Root ignores permission bits, so as root the targets are made immutable with
    ``chattr +i``; the test is skipped when that is impossible here.
    """
    targets = [path, path.parent] if with_directory else [path]
    if os.geteuid() != 0:
        for target in targets:
            target.chmod(0o555 if target.is_dir() else 0o444)
        try:
            yield
        finally:
            for target in targets:
                target.chmod(0o755 if target.is_dir() else 0o644)
        return
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("running as root without chattr: cannot make a file read-only for root")
    frozen: list[Path] = []
    try:
        for target in targets:
            done = subprocess.run([chattr, "+i", str(target)], capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"chattr +i {target} is not possible here ({done.stderr.strip()})")
            frozen.append(target)
        with pytest.raises(PermissionError), path.open("ab"):
            pass
        yield
    finally:
        for target in reversed(frozen):
            subprocess.run([chattr, "-i", str(target)], check=True)


@pytest.mark.parametrize(
    ("with_directory", "message"),
    [
        pytest.param(False, "readonly", id="file"),
        pytest.param(True, None, id="file_and_directory"),
    ],
)
async def test_read_only_journal_is_unavailable(
    tmp_path: Path, with_directory: bool, message: str | None
) -> None:
    """A journal file that cannot be written raises JournalUnavailable and keeps its data."""
    path = tmp_path / "ro" / "journal.db"
    path.parent.mkdir()
    creator = SQLiteJournal(path)
    await creator.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    await creator.close()
    before = path.read_bytes()

    with read_only(path, with_directory=with_directory):
        journal = SQLiteJournal(path)
        with pytest.raises(JournalUnavailable, match=message):
            await journal.record(
                make_intent("i-2"), state=IntentState.FAILED, owner=current_owner()
            )
        await journal.close()
        assert path.read_bytes() == before

    assert query(path, "SELECT intent_id FROM unresolved") == [("i-1",)]


# -- opening intents ---------------------------------------------------------------------------


async def test_opening_an_intent_is_one_statement_until_something_is_in_the_way(
    journal: SQLiteJournal,
) -> None:
    """An opening that records is one statement, with or without an expected count; a retried
    or refused one decides in a write transaction, and a refused one writes nothing."""
    owner = current_owner()
    await journal.open_intent(make_intent("warm"), state=IntentState.IN_FLIGHT, owner=owner)
    await journal.discard("warm")
    conn = journal._file.link._conn
    assert conn is not None
    statements: list[str] = []
    conn.set_trace_callback(statements.append)

    async def opening(name: str, expect: int | None) -> tuple[Opened, set[str]]:
        statements.clear()
        opened = await journal.open_intent(
            make_intent(name), state=IntentState.IN_FLIGHT, owner=owner, expect_write_count=expect
        )
        # The trace repeats a statement per step of it: count distinct ones.
        return opened, {text for text in statements if not text.startswith("--")}

    opened, ran = await opening("i-1", 2)
    assert opened == Opened(recorded=True, write_count=2) and len(ran) == 1
    await journal.discard("i-1")
    opened, ran = await opening("i-2", None)
    assert opened == Opened(recorded=True, write_count=4) and len(ran) == 1

    opened, ran = await opening("i-2", 4)
    assert opened == Opened(recorded=True, write_count=4) and "BEGIN IMMEDIATE" in ran
    await journal.discard("i-2")
    opened, ran = await opening("i-3", 4)
    assert opened == Opened(recorded=False, write_count=6) and "BEGIN IMMEDIATE" in ran
    conn.set_trace_callback(None)
    assert await journal.pending("session-a") == []
    assert await journal.write_count("session-a", BACKEND) == 6


async def test_an_append_writes_its_sessions_live_row_in_one_statement(
    journal: SQLiteJournal,
) -> None:
    """Opening the next intent while clearing the acknowledged one (what every append after
    the first does) is one statement on one row: the session's live row takes the new intent
    and counts both writes; no intent row is inserted or deleted, and no trigger runs."""
    owner = current_owner()
    first = make_intent("i-1")
    await journal.open_intent(first, state=IntentState.IN_FLIGHT, owner=owner)
    conn = journal._file.link._conn
    assert conn is not None
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        opened = await journal.open_intent(
            make_intent("i-2"), state=IntentState.IN_FLIGHT, owner=owner, clearing="i-1"
        )
    finally:
        conn.set_trace_callback(None)
    assert opened == Opened(recorded=True, write_count=2)
    assert len({text for text in statements if not text.startswith("--")}) == 1, statements
    assert query(journal.path, "SELECT session_id, write_count, intent_id, fence FROM live") == [
        ("session-a", 3, "i-2", 2)
    ]
    assert query(journal.path, "SELECT count(*) FROM intents") == [(0,)]
    assert [entry.intent.intent_id for entry in await journal.pending("session-a")] == ["i-2"]


async def test_an_intent_recorded_beside_a_live_one_blocks_and_lists_with_it(
    journal: SQLiteJournal,
) -> None:
    """A second unresolved intent of a session (``record``) is kept beside its live one: both
    are listed in the order they were made, by ``pending`` and by the pages, both block the
    session's next opening, and each leaves from where it is."""
    owner = current_owner()
    live = make_intent("live-1", created_at=1_700_000_000.0)
    beside = make_intent("beside-1", created_at=1_700_000_001.0)
    await journal.open_intent(live, state=IntentState.IN_FLIGHT, owner=owner)
    await journal.record(beside, state=IntentState.FAILED, owner=STRANGER)
    assert query(journal.path, "SELECT intent_id FROM intents") == [("beside-1",)]
    listed = ["live-1", "beside-1"]
    assert [entry.intent.intent_id for entry in await journal.pending("session-a")] == listed
    assert journal.pages is not None
    page = await journal.pages.intents(limit=10)
    assert [entry.intent.intent_id for entry in page.rows] == listed
    blocked = await journal.open_intent(
        make_intent("next-1"), state=IntentState.IN_FLIGHT, owner=owner
    )
    assert not blocked.recorded
    assert sorted(entry.intent.intent_id for entry in blocked.blocking) == sorted(listed)
    await journal.discard("live-1")
    blocked = await journal.open_intent(
        make_intent("next-1"), state=IntentState.IN_FLIGHT, owner=owner
    )
    assert [entry.intent.intent_id for entry in blocked.blocking] == ["beside-1"]
    assert await journal.transition(
        "beside-1", state=IntentState.RECONCILING, owner=owner, expect_owner=STRANGER
    )
    await journal.settle(make_decision(beside), owner=owner)
    opened = await journal.open_intent(
        make_intent("next-1"), state=IntentState.IN_FLIGHT, owner=owner
    )
    assert opened.recorded
    assert query(journal.path, "SELECT intent_id FROM live") == [("next-1",)]
    assert query(journal.path, "SELECT count(*) FROM intents") == [(0,)]


async def test_a_version_3_journal_keeps_its_intents_and_counts_at_the_upgrade(
    tmp_path: Path,
) -> None:
    """A file an earlier release wrote (schema 3: intents in their own table, counts in
    another): a reader lists its intents without migrating it; the upgrade keeps every count
    and every intent, which still blocks its session until it is settled, after which the
    session's next intent is opened in its live row."""
    path = tmp_path / "journal.db"
    older = Schema(
        "journal", SCHEMA.steps[:3], SCHEMA.error, package=SCHEMA.package, folder=SCHEMA.folder
    )
    SQLiteSchema(older, "journal_schema").migrate_file(path, 5.0)
    waiting = make_intent("old-1")
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "INSERT INTO intents (intent_id, session_id, backend, state, owner, created_at,"
            " updated_at, record, fence) VALUES (?, ?, ?, 'in_flight', ?, ?, ?, ?, 4)",
            (
                waiting.intent_id,
                waiting.session_id,
                str(BACKEND),
                str(STRANGER),
                waiting.created_at,
                waiting.created_at,
                waiting.encode(),
            ),
        )  # its trigger counted it: 1
        conn.execute(
            "UPDATE session_writes SET write_count = 5 WHERE session_id = ?", ("session-a",)
        )
        conn.execute(
            "INSERT INTO session_writes (session_id, backend, write_count, counted_at)"
            " VALUES ('idle', ?, 7, 0)",
            (str(BACKEND),),
        )
    reader = SQLiteJournal(path, read_only=True)
    try:
        assert [e.intent.intent_id for e in await reader.pending(None)] == ["old-1"]
        assert reader.pages is not None
        page = await reader.pages.intents(limit=10)
        assert [entry.intent.intent_id for entry in page.rows] == ["old-1"]
    finally:
        await reader.close()
    assert query(path, "SELECT max(version) FROM journal_schema") == [(3,)]

    journal = SQLiteJournal(path)
    try:
        assert await journal.migrate() == ["journal schema 4"]
        assert await journal.write_count("session-a", BACKEND) == 5
        assert await journal.write_count("idle", BACKEND) == 7
        owner = current_owner()
        blocked = await journal.open_intent(
            make_intent("new-1"), state=IntentState.IN_FLIGHT, owner=owner
        )
        assert [entry.intent.intent_id for entry in blocked.blocking] == ["old-1"]
        assert await journal.transition(
            "old-1", state=IntentState.RECONCILING, owner=owner, expect_owner=STRANGER
        )
        [claimed] = await journal.pending("session-a")
        assert claimed.fence == 5, "a claim's token is at least the session's count"
        await journal.settle(make_decision(waiting), owner=owner, fence=5)
        opened = await journal.open_intent(
            make_intent("new-1"), state=IntentState.IN_FLIGHT, owner=owner
        )
        assert opened == Opened(recorded=True, write_count=6)
        live = "SELECT intent_id, write_count FROM live WHERE intent_id IS NOT NULL"
        assert query(path, live) == [("new-1", 7)]
    finally:
        await journal.close()


# -- contention ------------------------------------------------------------------------------


async def test_record_waits_for_a_held_lock_off_the_event_loop(journal: SQLiteJournal) -> None:
    """With another connection holding the write lock for 0.3 s, record() waits and succeeds
    while the event loop keeps ticking."""
    with write_lock_held(journal.path, 0.3):
        start = time.monotonic()
        async with Ticker() as ticker:
            await journal.record(
                make_intent("i-1"), state=IntentState.FAILED, owner=current_owner()
            )
        waited = time.monotonic() - start

    assert waited >= 0.15, "record() did not meet the lock; the test proves nothing"
    assert ids_of(await journal.pending("session-a")) == ["i-1"]
    assert len(ticker.stamps) >= 10
    assert ticker.longest_gap < 0.1


async def test_first_use_under_a_held_lock_keeps_the_loop_responsive(tmp_path: Path) -> None:
    """A fresh instance whose first operation meets a held lock still waits off the event
    loop."""
    path = tmp_path / "journal.db"
    creator = SQLiteJournal(path)
    await creator.pending("warm-up")
    await creator.close()

    fresh = SQLiteJournal(path)
    try:
        with write_lock_held(path, 0.3):
            async with Ticker() as ticker:
                await fresh.record(
                    make_intent("i-1"), state=IntentState.FAILED, owner=current_owner()
                )
        assert ids_of(await fresh.pending("session-a")) == ["i-1"]
        assert ticker.longest_gap < 0.1
    finally:
        await fresh.close()


async def test_lock_held_past_busy_timeout_is_unavailable(tmp_path: Path) -> None:
    """When the lock outlasts busy_timeout, record() raises JournalUnavailable after about that
    long, and works again once the lock is gone."""
    journal = SQLiteJournal(tmp_path / "journal.db", busy_timeout=0.2)
    try:
        await journal.pending("warm-up")
        with write_lock_held(journal.path, 1.5):
            start = time.monotonic()
            with pytest.raises(JournalUnavailable):
                await journal.record(
                    make_intent("i-1"), state=IntentState.FAILED, owner=current_owner()
                )
            elapsed = time.monotonic() - start
        assert 0.15 <= elapsed < 1.0
        assert await journal.get("i-1") is None

        await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
        assert ids_of(await journal.pending("session-a")) == ["i-1"]
    finally:
        await journal.close()


def ids_of(entries: list[Any]) -> list[str]:
    """Intent ids of journal entries, in order."""
    return [entry.intent.intent_id for entry in entries]


# -- open_journal ----------------------------------------------------------------------------


@pytest.fixture
async def opened() -> AsyncIterator[list[IntentJournal]]:
    """Collects journals returned by open_journal and closes them afterwards."""
    journals: list[IntentJournal] = []
    yield journals
    for journal in journals:
        await journal.close()


def resolved(path: Path) -> Path:
    """``path`` with symlinks resolved, as the journal stores it."""
    return path.resolve()


def sqlite_at(spec: Any, opened: list[IntentJournal]) -> SQLiteJournal:
    """open_journal(spec), checked to be an SQLite journal and remembered for closing."""
    journal = open_journal(spec)
    opened.append(journal)
    assert isinstance(journal, SQLiteJournal)
    return journal


async def test_open_journal_resolves_paths_and_sqlite_urls(
    tmp_path: Path, opened: list[IntentJournal]
) -> None:
    """Plain paths, Path objects and sqlite:/// (relative) and sqlite://// (absolute) URLs all
    open an SQLite journal on the expected file."""
    here = resolved(Path.cwd())
    assert sqlite_at("plain.db", opened).path == here / "plain.db"
    assert sqlite_at(Path("as-path.db"), opened).path == here / "as-path.db"
    assert sqlite_at("sqlite:///relative.db", opened).path == here / "relative.db"
    absolute = resolved(tmp_path) / "sub" / "absolute.db"
    absolute.parent.mkdir()
    url = f"sqlite:///{absolute}"
    assert url.startswith("sqlite:////")
    journal = sqlite_at(url, opened)
    assert journal.path == absolute

    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    assert absolute.is_file()
    assert query(absolute, "SELECT intent_id FROM unresolved") == [("i-1",)]


async def test_open_journal_relative_url_follows_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opened: list[IntentJournal]
) -> None:
    """sqlite:///relative.db is resolved against the working directory at the time of the
    call."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    assert sqlite_at("sqlite:///relative.db", opened).path == resolved(elsewhere) / "relative.db"


async def test_open_journal_shares_one_instance_per_file(
    tmp_path: Path, opened: list[IntentJournal]
) -> None:
    """Every spelling of one file yields the same instance; another file yields another."""
    first = sqlite_at("shared.db", opened)
    spellings = [
        "./shared.db",
        Path("shared.db"),
        "sqlite:///shared.db",
        str(tmp_path / "shared.db"),
        f"sqlite:///{tmp_path / 'shared.db'}",
        f"sqlite:///{tmp_path / 'x' / '..' / 'shared.db'}",
    ]
    (tmp_path / "x").mkdir()
    for spelling in spellings:
        assert open_journal(spelling) is first, spelling
    assert sqlite_at("other.db", opened) is not first


@pytest.mark.parametrize(
    "spec",
    [
        "redis://localhost:6379/0",
        "rediss://cache.example:6380/1",
        "postgresql://app@db.example/agents",
        "postgres://db.example/agents",
    ],
)
def test_open_journal_opens_fleet_journals_lazily(spec: str) -> None:
    """Redis and PostgreSQL URLs open their journals without connecting yet, and the repr
    never shows a password."""
    journal = open_journal(spec.replace("app@", "app:secret@"))
    assert type(journal).__name__ in ("RedisJournal", "PostgresJournal")
    assert "secret" not in repr(journal)


@pytest.mark.parametrize("spec", ["ftp://host/journal.db", "mysql://db/agents", "sqlite://"])
def test_open_journal_refuses_unknown_or_empty_urls(spec: str) -> None:
    """Unknown schemes, and an sqlite URL without a path, raise ConfigurationError."""
    with pytest.raises(ConfigurationError):
        open_journal(spec)


def test_a_config_refuses_an_unknown_scheme_and_hides_a_journal_password() -> None:
    """ReconcileConfig refuses a journal URL no registered backend serves when it is built,
    and its repr shows a journal URL without the password."""
    with pytest.raises(ConfigurationError, match="'ftp'"):
        ReconcileConfig(journal="ftp://agent:hunter2@host/journal")
    config = ReconcileConfig(journal="redis://agent:hunter2@127.0.0.1:6390/0")
    assert "hunter2" not in repr(config)
    assert "redis://agent@127.0.0.1:6390/0" in repr(config)


def test_open_journal_refuses_other_objects() -> None:
    """An object that is neither a journal, a path nor a URL raises ConfigurationError."""
    with pytest.raises(ConfigurationError):
        open_journal(42)  # type: ignore[arg-type]


# -- fork ------------------------------------------------------------------------------------


def test_fork_child_writes_and_parent_keeps_working(tmp_path: Path) -> None:
    """A forked child writes through the inherited journal with its own connection; the
    parent then sees the child's record and its own journal still works."""
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    parent_intent = make_intent("parent-1", created_at=1.0)
    asyncio.run(journal.record(parent_intent, state=IntentState.FAILED, owner=current_owner()))

    child_intent = make_intent("child-1", created_at=2.0, text="from the child")
    # White-box: SQLite forbids carrying a connection across fork, which rarely fails visibly,
    # so the child also checks that it did not reuse the parent's connection object.
    parent_connection = journal._file.link._conn
    assert parent_connection is not None
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(
                    journal.record(child_intent, state=IntentState.IN_FLIGHT, owner=current_owner())
                )
                entry = loop.run_until_complete(journal.get("parent-1"))
                reused = journal._file.link._conn is parent_connection
                code = 2 if entry is None else 3 if reused else 0
            finally:
                loop.close()
        finally:
            os._exit(code)

    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

    async def parent_side() -> None:
        entries = await journal.pending("session-a")
        assert [e.intent for e in entries] == [parent_intent, child_intent]
        assert entries[1].owner.pid == pid
        assert entries[1].owner != current_owner()

        later = make_intent("parent-2", created_at=3.0, text="after the fork")
        await journal.record(later, state=IntentState.FAILED, owner=current_owner())
        await journal.settle(make_decision(parent_intent))
        assert ids_of(await journal.pending("session-a")) == ["child-1", "parent-2"]
        await journal.close()

        fresh = SQLiteJournal(path)
        try:
            assert ids_of(await fresh.pending("session-a")) == ["child-1", "parent-2"]
            assert await fresh.is_settled("parent-1")
        finally:
            await fresh.close()

    asyncio.run(parent_side())


async def test_a_row_moved_to_another_session_is_refused(
    journal: SQLiteJournal, tmp_path: Path
) -> None:
    """A row whose session column was edited (to hide it from its session) is refused."""
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    with sqlite3.connect(journal.path) as conn:
        conn.execute("UPDATE intents SET session_id = 'someone-else'")
    with pytest.raises(RecordTampered):
        await journal.pending(None)


async def test_read_only_journal_reads_and_never_writes(tmp_path: Path) -> None:
    """A read-only journal lists what is there, refuses writes, and never creates a file."""
    path = tmp_path / "journal.db"
    writer = SQLiteJournal(path)
    intent = make_intent("i-1")
    await writer.record(intent, state=IntentState.FAILED, owner=current_owner())
    await writer.close()

    reader = SQLiteJournal(path, read_only=True)
    assert [e.intent.intent_id for e in await reader.pending(None)] == ["i-1"]
    with pytest.raises(JournalUnavailable):
        await reader.discard("i-1")
    await reader.close()
    missing = SQLiteJournal(tmp_path / "absent.db", read_only=True)
    with pytest.raises(JournalUnavailable):
        await missing.pending(None)
    assert not (tmp_path / "absent.db").exists()


_OPEN_AT_ONCE = """
import asyncio, sys, time
from pathlib import Path
from agents_reconcile import BackendIdentity, SQLiteJournal
from agents_reconcile import RevisionedSQLiteSession
directory = Path(sys.argv[1])
(directory / f"ready-{sys.argv[2]}").touch()
while not (directory / "go").exists():
    time.sleep(0.001)
async def main():
    journal = SQLiteJournal(directory / "journal.db")
    await journal.write_count("s", BackendIdentity.parse(sys.argv[3]))
    store = RevisionedSQLiteSession("s", directory / "store.db")
    await store.add_items([{"role": "user", "content": sys.argv[2]}])
asyncio.run(main())
"""


def test_processes_creating_one_file_at_once_all_open_it(tmp_path: Path) -> None:
    """Four processes opening the same new journal and revisioned store files at the same
    moment all get them (switching a new file to WAL is retried while another holds it)."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _OPEN_AT_ONCE, str(tmp_path), str(number), str(BACKEND)],
            stderr=subprocess.PIPE,
        )
        for number in range(4)
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{number}").exists() for number in range(4)):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for process in processes:
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err.decode()
    with sqlite3.connect(tmp_path / "store.db") as conn:
        assert conn.execute("SELECT count(*) FROM revisioned_items").fetchone()[0] == 4


async def test_no_statement_of_an_append_or_a_reconcile_scans_a_table(tmp_path: Path) -> None:
    """Among many sessions, some holding an abandoned intent, every statement the journal
    runs for an append, a failed append and its reconciliation finds its rows through a
    key or an index: EXPLAIN QUERY PLAN shows no scan of a table, so their cost does not
    grow with the journal."""
    from agents import SQLiteSession

    from agents_reconcile import ReconcilingSession
    from agents_reconcile.testing import Fault, FaultInjectingSession

    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    for n in range(200):
        await journal.record(
            make_intent(f"abandoned-{n}", session_id=f"other-{n}"),
            state=IntentState.FAILED,
            owner=current_owner(),
        )
    inner = FaultInjectingSession(SQLiteSession("s1", str(tmp_path / "chat.db")))
    session = ReconcilingSession(inner, config=ReconcileConfig(journal=journal))
    await session.add_items([{"role": "user", "content": "first"}])
    ran: list[str] = []
    journal._file.link._connection().set_trace_callback(ran.append)
    try:
        for n in range(3):
            await session.add_items([{"role": "user", "content": f"next {n}"}])
        inner.plan(Fault.LOST_ACK)
        with pytest.raises(ConnectionError):
            await session.add_items([{"role": "user", "content": "lost"}])
        await session.reconcile()
        await session.add_items([{"role": "user", "content": "after"}])
    finally:
        journal._file.link._connection().set_trace_callback(None)
    statements = {
        s
        for s in ran
        if s.lstrip().upper().startswith(("SELECT", "INSERT", "UPDATE", "DELETE", "WITH"))
    }
    assert statements, "no statement was traced"
    with closing(sqlite3.connect(path)) as conn:
        scans = {s: [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + s)] for s in statements}
    tables = ("intents", "decisions", "live", "write_floor", "effects", "set_aside")
    scanning = {
        s: p for s, p in scans.items() if any(d.startswith(f"SCAN {t}") for d in p for t in tables)
    }
    assert not scanning, "\n\n".join(f"{s}\n  {p}" for s, p in scanning.items())
    await journal.close()
