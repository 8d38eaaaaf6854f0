"""What an operator types by mistake, on every journal address (an SQLite path, ``redis://``,
``postgresql://`` in a namespace of its own): a journal that is not there is refused, by
``check`` with or without ``--repair`` as by every other command, and nothing is created (no
file, no schema, no key); a place that holds something else is named for what it holds, with
the journals found nearby, never answered with ``migrate``; a permission that stops a read
says so, and which path; and reading a journal leaves no file beside it."""

from __future__ import annotations

import argparse
import asyncio
import os
import pwd
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from agents import SQLiteSession

from agents_reconcile import ContinuationDenied, ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.redis.backend import glob_escape
from agents_reconcile._backends.sqlite.journal import SQLiteJournal
from agents_reconcile._cli import main
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import address, closed_port, namespace, redis_client, registered

JOURNALS = [p for p in registered("journal") if p.values[0].name != "memory"]
SERVER_JOURNALS = [p for p in JOURNALS if p.values[0].server]
SESSION = "user-42"
SIDE_FILES = ("-wal", "-shm", "-journal")
REPAIR = ("--repair", "--reason", "an orphan after an outage")


class Missing:
    """A journal address (and, on a server, a namespace of its own) where no journal is, and
    what can be found there afterwards."""

    def __init__(self, backend: Any, directory: Path) -> None:
        self.backend = backend
        self.directory = directory
        self.address = address(backend, directory, "missing-typo")
        self.space = namespace() if backend.server else None

    def args(self, space: str | None = None) -> list[str]:
        space = space or self.space
        found = ["--journal", self.address]
        return [*found, "--namespace", space] if space else found

    async def traces(self, space: str | None = None) -> list[str]:
        """Whatever is at the place: files, keys under the prefix, the schema."""
        space = space or self.space
        if not self.backend.server:
            name = Path(self.address).name
            return sorted(p.name for p in self.directory.iterdir() if p.name.startswith(name))
        assert space is not None
        if self.backend.name.startswith("redis"):
            client = redis_client(self.address)
            try:
                return [
                    key.decode() async for key in client.scan_iter(match=f"{glob_escape(space)}*")
                ]
            finally:
                await client.aclose()
        import asyncpg

        conn = await asyncpg.connect(self.address)
        try:
            rows = await conn.fetch("SELECT nspname FROM pg_namespace WHERE nspname = $1", space)
            return [row[0] for row in rows]
        finally:
            await conn.close()

    async def make_journal(self, space: str) -> None:
        journal: Any = self.backend.open_journal(self.address, namespace=space)
        try:
            await journal.migrate()
        finally:
            await journal.close()

    async def drop(self, space: str) -> None:
        journal: Any = self.backend.open_journal(self.address, namespace=space)
        try:
            await journal.drop()
        finally:
            await journal.close()


@pytest.fixture(params=JOURNALS)
def missing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Missing]:
    found = Missing(request.param, tmp_path)
    yield found
    if found.space is not None:
        asyncio.run(found.drop(found.space))  # only if a test failed: nothing is there


@pytest.fixture(params=SERVER_JOURNALS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Missing]:
    found = Missing(request.param, tmp_path)
    yield found
    assert found.space is not None
    for space in (found.space, f"{found.space}x"):
        asyncio.run(found.drop(space))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    [line] = err.strip().splitlines()
    assert line.startswith("agents-reconcile: "), line
    return line


def refusal(line: str) -> str:
    """A refusal without the other journals it names on the server: tests running meanwhile
    make and drop theirs there."""
    return re.sub(r"; journals found under: .*? \(name", "; journals found under: ... (name", line)


def damaged_store(directory: Path) -> Path:
    """An SDK session file whose history a repair would rewrite: a call and its output stored
    twice, and an output without its call."""
    store = directory / "chat.db"
    call: Any = {"type": "function_call", "call_id": "c1", "name": "charge_card", "arguments": "{}"}
    output: Any = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    orphan: Any = {"type": "function_call_output", "call_id": "gone", "output": "ok"}
    user: Any = {"role": "user", "content": "hi"}

    async def write() -> None:
        session = SQLiteSession(SESSION, store)
        await session.add_items([user, call, output, call, output])
        await session.add_items([orphan])
        session.close()

    asyncio.run(write())
    return store


def tables(path: Path) -> list[str]:
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    finally:
        conn.close()
    return sorted(name for (name,) in rows)


def side_files(journal: Path) -> list[str]:
    return [
        journal.name + suffix
        for suffix in SIDE_FILES
        if journal.with_name(journal.name + suffix).exists()
    ]


# -- nothing typed by mistake creates a journal ------------------------------------------------


@pytest.mark.parametrize("repair", [False, True], ids=["check", "repair"])
def test_a_check_or_a_repair_against_a_missing_journal_creates_nothing(
    missing: Missing, repair: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """``check --repair`` recorded its intent in a new journal wherever ``--journal`` pointed,
    and went ahead: a mistyped path, prefix or schema got a journal the application never
    reads. Now ``check``, with or without ``--repair``, refuses a journal that is not there as
    every other command does (exit 2, one line), and nothing is created: no file (nor its
    ``-wal``, ``-shm``), no key under the prefix, no schema; the store is not written."""
    store = damaged_store(missing.directory)
    before = store.read_bytes()
    argv = ["check", SESSION, "--store", str(store), *missing.args()]
    if repair:
        argv += REPAIR
    code, out, err = cli(capsys, *argv)
    assert code == 2, out + err
    line = one_line(err)
    assert "no journal" in line, line
    assert asyncio.run(missing.traces()) == []
    assert store.read_bytes() == before
    # Every other command says the same of the same address.
    code, _, status_err = cli(capsys, "status", *missing.args())
    assert code == 2 and refusal(one_line(status_err)) == refusal(line)
    assert asyncio.run(missing.traces()) == []


def test_a_mistyped_journal_file_names_the_journals_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that is not there is no place to create a journal in: the answer names the
    journals beside it, and not ``migrate``."""
    asyncio.run(SQLiteJournal(tmp_path / "journal.db").migrate())
    (tmp_path / "notes.db").write_bytes(b"")
    typo = tmp_path / "journl.db"
    code, _, err = cli(capsys, "status", "--journal", str(typo))
    line = one_line(err)
    assert code == 2
    assert f"no journal file at {typo}; journals in {tmp_path}: journal.db" in line, line
    assert "notes.db" not in line and "migrate" not in line
    assert not typo.exists() and side_files(typo) == []
    code, _, err = cli(capsys, "decisions", "--journal", str(tmp_path / "none" / "journal.db"))
    assert code == 2 and "there is no directory" in one_line(err)


# -- what is there instead ---------------------------------------------------------------------


def test_a_session_store_given_as_the_journal_is_named_as_one_and_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--journal chat.db`` (the store's file, a natural slip) said "run migrate", which would
    put a journal's tables into the chat store. It now says what the file holds."""
    store = damaged_store(tmp_path)
    before = (store.read_bytes(), tables(store))
    for argv in (
        ["status", "--journal", str(store)],
        ["check", SESSION, "--store", str(store), "--journal", str(store)],
        ["check", SESSION, "--store", str(store), "--journal", str(store), *REPAIR],
    ):
        code, _, err = cli(capsys, *argv)
        line = one_line(err)
        assert code == 2, line
        assert "holds agent_sessions and agent_messages tables" in line, line
        assert "looks like a session store, not a journal" in line
        assert "ReconcileConfig(journal=...)" in line and "migrate" not in line
    code, out, _ = cli(capsys, "migrate", "--check", "--journal", str(store))
    assert code == 1 and "session store" in out and "run `agents-reconcile migrate`" not in out
    code, _, err = cli(capsys, "migrate", "--journal", str(store))
    assert code == 2 and "looks like a session store" in err, err
    assert (store.read_bytes(), tables(store)) == before


def test_a_misspelled_namespace_names_the_ones_holding_a_journal(
    server: Missing, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Redis prefix or PostgreSQL schema misspelled (or forgotten: the default is one more
    name without a journal) is answered with the namespaces that hold a journal, the nearest
    to the name given first, and nothing is created under the name given."""
    assert server.space is not None
    asyncio.run(server.make_journal(server.space))
    typo = f"{server.space}x"
    code, _, err = cli(capsys, "status", *server.args(typo))
    line = one_line(err)
    assert code == 2, line
    if server.backend.name.startswith("redis"):
        assert f"no journal under prefix {typo!r}; journals found under: {server.space}" in line
    else:
        assert f"no journal in schema {typo!r}: there is no such schema" in line, line
        assert f"schemas holding a journal: {server.space}" in line, line
    assert "--namespace" in line and "migrate" not in line
    assert asyncio.run(server.traces(typo)) == []
    code, _, _ = cli(capsys, "status", *server.args())
    assert code == 0, "the journal named right is found"


def test_a_namespace_holding_something_else_is_named_for_it_and_never_migrated(
    server: Missing, capsys: pytest.CaptureFixture[str]
) -> None:
    """A prefix holding other keys, or a schema holding other tables, is not a journal yet to
    be made: the answer says what it holds, and it is left as it is."""
    assert server.space is not None
    space = server.space

    async def fill() -> None:
        if server.backend.name.startswith("redis"):
            client = redis_client(server.address)
            try:
                await client.set(f"{space}:notes", "kept")
            finally:
                await client.aclose()
        else:
            import asyncpg

            conn = await asyncpg.connect(server.address)
            try:
                await conn.execute(f'CREATE SCHEMA "{space}"')
                await conn.execute(f'CREATE TABLE "{space}".notes (body text)')
            finally:
                await conn.close()

    asyncio.run(fill())
    code, _, err = cli(capsys, "status", *server.args())
    line = one_line(err)
    assert code == 2, line
    if server.backend.name.startswith("redis"):
        assert f"no journal under prefix {space!r}: it holds other keys ({space}:notes)" in line
        assert asyncio.run(server.traces()) == [f"{space}:notes"]
    else:
        assert f"no journal in schema {space!r}: it holds tables notes" in line, line
    assert "migrate" not in line


# -- permissions -------------------------------------------------------------------------------


PROBE = """\
import sys, agents_reconcile
try:
    open(sys.argv[1]).close()
except PermissionError:
    print("bound")
"""
"""Run as the command will be: imports the package, then tries to read a file of mode 000."""
UNREADABLE_FILE = "unreadable"


def _probe(prefix: list[str], directory: Path) -> str | None:
    """None when ``prefix`` runs this interpreter, imports the package and is refused a file
    of mode 000; otherwise what went wrong, in a line."""
    target = directory / UNREADABLE_FILE
    target.touch()
    target.chmod(0o000)
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-c", PROBE, str(target)],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        target.unlink()
    if done.returncode == 0 and done.stdout.strip() == "bound":
        return None
    said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return said if done.returncode else "the file of mode 000 was read: permissions do not bind"


def another_user(directory: Path) -> list[str]:
    """What runs a command so that permission bits bind it: nothing but the command when this
    process is not root. As root (whom they do not bind), ``setpriv`` keeping the user but
    dropping every capability, so that the interpreter and the package stay reachable where
    they are (a checkout in a directory only root may enter); where that cannot be done, the
    user ``nobody``, if it can run this interpreter and import this package; else skip,
    saying why."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip(
            "running as root, where permission bits are not enforced, and setpriv (util-linux) "
            "is not here to drop the capabilities that bypass them"
        )
    dropped = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"]
    why_not_dropped = _probe(dropped, directory)
    if why_not_dropped is None:
        return dropped
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip(
            "running as root, where permission bits are not enforced; dropping capabilities "
            f"failed ({why_not_dropped}) and there is no user nobody"
        )
    as_nobody = [
        "setpriv",
        f"--reuid={nobody.pw_uid}",
        f"--regid={nobody.pw_gid}",
        "--clear-groups",
        "--",
    ]
    why_not_nobody = _probe(as_nobody, directory)
    if why_not_nobody is None:
        return as_nobody
    pytest.skip(
        "running as root, where permission bits are not enforced; dropping capabilities "
        f"failed ({why_not_dropped}), and the user nobody cannot run {sys.executable} with "
        f"this package importable ({why_not_nobody}): the interpreter or the checkout lies "
        "under a directory only root may enter"
    )


def as_another_user(directory: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*another_user(directory), sys.executable, "-m", "agents_reconcile", *argv],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user may look into (a test's own is root's alone, under root)."""
    directory = Path(tempfile.mkdtemp(prefix="agents-reconcile-"))
    directory.chmod(0o755)
    yield directory
    for path in (directory, *directory.rglob("*")):
        if path.is_dir():
            path.chmod(0o755)
    shutil.rmtree(directory)


def journal_in(directory: Path) -> Path:
    path = directory / "journal.db"
    asyncio.run(SQLiteJournal(path).migrate())
    assert side_files(path) == []
    return path


def test_a_journal_in_a_read_only_directory_is_said_to_be_read_only(shared_dir: Path) -> None:
    """A journal this user may read, in a directory it may not write, was "damaged or not a
    database: attempt to write a readonly database": SQLite reads a journal in WAL mode
    through files beside it, which it cannot create there. Now the directory is named, and
    why."""
    directory = shared_dir / "ro"
    directory.mkdir()
    journal = journal_in(directory)
    journal.chmod(0o644)
    directory.chmod(0o555)
    done = as_another_user(shared_dir, "status", "--journal", str(journal))
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_line(done.stderr)
    assert f"the directory {directory} is read-only to this user (permission denied)" in line
    assert "journal.db-wal and journal.db-shm" in line and "damaged" not in line
    assert side_files(journal) == []


def test_a_journal_file_this_user_may_not_read_is_said_to_be_unreadable(
    shared_dir: Path,
) -> None:
    """A journal file without read permission was "unable to open database file"."""
    journal = journal_in(shared_dir)
    journal.chmod(0o000)
    for argv in (
        ["status", "--journal", str(journal)],
        ["migrate", "--check", "--journal", str(journal)],
    ):
        done = as_another_user(shared_dir, *argv)
        said = done.stderr + done.stdout
        assert done.returncode in (1, 2), said
        assert f"permission denied: this user may not read the journal file {journal}" in said
        assert "unable to open" not in said
    assert side_files(journal) == []


# -- reading leaves nothing beside the journal -------------------------------------------------


def test_reading_commands_leave_no_files_beside_the_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A journal written, then closed (its commits copied into the file, ``-wal`` and ``-shm``
    gone), is read by every command that only reads: none leaves a file beside it, and the
    file is not changed."""
    journal, store = tmp_path / "journal.db", tmp_path / "chat.db"

    async def pending_intent() -> str:
        faulty = FaultInjectingSession(SQLiteSession(SESSION, store))
        session = ReconcilingSession(faulty, config=ReconcileConfig(journal=journal))
        faulty.plan(Fault.REJECT)
        with pytest.raises(BackendFailure):
            await session.add_items([{"role": "user", "content": "hi"}])
        [entry] = await session.pending()
        await session.journal.close()
        return entry.intent_id

    intent_id = asyncio.run(pending_intent())
    assert side_files(journal) == [], "the journal's last connection closed"
    before = journal.read_bytes()
    for argv in (
        ["status"],
        ["status", "--json"],
        ["show", intent_id],
        ["show", intent_id, "--store", str(store)],
        ["trail", SESSION],
        ["decisions"],
        ["check", SESSION, "--store", str(store)],
        ["migrate", "--check"],
    ):
        code, out, err = cli(capsys, *argv, "--journal", str(journal))
        assert code in (0, 1), out + err
        assert side_files(journal) == [], argv
    assert journal.read_bytes() == before
    code, out, _ = cli(capsys, "status", "--json", "--journal", str(journal))
    assert [i["intent_id"] for i in orjson.loads(out)["pending"]] == [intent_id]


def test_a_reader_beside_a_live_writer_leaves_the_writers_files_to_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """While the application holds the journal open, its ``-wal`` and ``-shm`` are there: a
    reading command joins them, and once the application closes, none is left."""
    journal = tmp_path / "journal.db"

    async def scenario() -> None:
        writer = SQLiteJournal(journal)
        await writer.migrate()
        await writer.decisions(limit=1)  # the connection is open, in WAL mode
        assert side_files(journal) == ["journal.db-wal", "journal.db-shm"]
        code, out, err = await asyncio.to_thread(cli, capsys, "status", "--journal", str(journal))
        assert code == 0, out + err
        assert side_files(journal) == ["journal.db-wal", "journal.db-shm"]
        await writer.close()

    asyncio.run(scenario())
    assert side_files(journal) == []


def test_a_journal_on_a_read_only_file_system_is_read_as_it_is_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no process can change the file (a read-only file system: a snapshot, a backup
    mounted to look into), it is read as stored, with no lock and no file beside it."""
    from agents_reconcile._backends.sqlite import files as sqlite_journal

    journal = journal_in(tmp_path)
    monkeypatch.setattr(sqlite_journal, "_on_read_only_file_system", lambda path: True)
    opened: list[str] = []
    connect = sqlite3.connect

    def recording(target: str, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(str(target))
        return connect(target, *args, **kwargs)

    monkeypatch.setattr(sqlite_journal.sqlite3, "connect", recording)
    code, out, err = cli(capsys, "status", "--journal", str(journal))
    assert code == 0, out + err
    assert opened and all(target.endswith("?immutable=1") for target in opened), opened
    assert side_files(journal) == []


def test_the_journal_and_its_namespace_come_from_the_environment_when_not_given(
    server: Missing, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `--journal` and `--namespace`, a command reads AGENTS_RECONCILE_JOURNAL and
    AGENTS_RECONCILE_JOURNAL_NAMESPACE: `status` finds the journal there, a misspelled
    namespace in the variable is answered as on the command line (naming the one that holds
    a journal), an option given wins over its variable, and `--help` names both variables."""
    assert server.space is not None
    asyncio.run(server.make_journal(server.space))
    monkeypatch.setenv("AGENTS_RECONCILE_JOURNAL", server.address)
    monkeypatch.setenv("AGENTS_RECONCILE_JOURNAL_NAMESPACE", server.space)
    code, _, err = cli(capsys, "status")
    assert code == 0, err
    monkeypatch.setenv("AGENTS_RECONCILE_JOURNAL_NAMESPACE", f"{server.space}x")
    code, _, err = cli(capsys, "status")
    assert code == 2 and server.space in one_line(err)
    code, _, err = cli(capsys, "status", "--namespace", server.space)
    assert code == 0, err
    monkeypatch.setenv("AGENTS_RECONCILE_JOURNAL", "")
    code, _, err = cli(capsys, "status", *server.args())
    assert code == 0, err
    code, out, _ = cli(capsys, "status", "--help")
    assert code == 0
    assert "AGENTS_RECONCILE_JOURNAL " in out and "AGENTS_RECONCILE_JOURNAL_NAMESPACE" in out


def test_a_journal_from_the_environment_is_named_in_full_in_the_hints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal read from AGENTS_RECONCILE_JOURNAL is named with `--journal` in the hints a
    command prints, so they run as printed where the variable is not set; the self-test's own
    `--journal` (a kind of journal, not an address) is left alone."""
    from agents_reconcile._operator.options import journal_from_environment

    journal = tmp_path / "journal.db"
    faulty = FaultInjectingSession(SQLiteSession("s1", tmp_path / "chat.db"))
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=journal))
    faulty.plan(Fault.CONCURRENT_WRITER)

    async def denied() -> None:
        with pytest.raises(BackendFailure):
            await session.add_items([{"role": "user", "content": "hi"}])
        with pytest.raises(ContinuationDenied):
            await session.reconcile()

    asyncio.run(denied())
    monkeypatch.setenv("AGENTS_RECONCILE_JOURNAL", str(journal))
    code, out, _ = cli(capsys, "status")
    assert code == 1
    [hint] = [line.strip() for line in out.splitlines() if "agents-reconcile show" in line]
    monkeypatch.delenv("AGENTS_RECONCILE_JOURNAL")
    argv = shlex.split(hint)[1:]
    assert argv[argv.index("--journal") + 1] == str(journal)
    assert cli(capsys, *argv)[0] == 0
    selftest = argparse.Namespace(journal=["redis"], namespace=None)
    journal_from_environment(selftest, {"AGENTS_RECONCILE_JOURNAL": str(journal)})
    assert selftest.journal == ["redis"]


def test_a_redis_server_that_cannot_be_reached_is_said_to_be_unreachable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`status` on a Redis address where no server listens says, in one line, that the
    journal could not be reached while reading its schema version (every command's first
    read), not that it "cannot be used for check"; exit 2."""
    port = closed_port()
    code, _, err = cli(capsys, "status", "--journal", f"redis://127.0.0.1:{port}/0")
    line = one_line(err)
    assert code == 2
    assert "could not be reached during the read of its schema version" in line, line
    assert "for check" not in line
