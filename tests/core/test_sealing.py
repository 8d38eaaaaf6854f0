"""Sealed payloads: over an encrypting store nothing readable reaches any journal.

Each scenario runs the real SDK runner over the SDK's ``EncryptedSession`` (on a
``SQLiteSession`` file) wrapped in ``ReconcilingSession`` with the default configuration, and
writes a card number that no byte of any file the run leaves may hold: the journal with its
write-ahead log and shared memory, the Redis append-only file of a server started with it on,
PostgreSQL's data files and write-ahead log after a checkpoint. A control conversation on the
same journal without encryption proves that each scan does find plaintext where there is some.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import shutil
import socket
import sqlite3
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from agents import Agent, Runner
from agents.extensions.memory.encrypt_session import EncryptedSession
from agents.memory import SQLiteSession
from agents.testing import ScriptedModel, assistant_message
from cryptography.fernet import Fernet

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.journal import IntentJournal
from agents_reconcile._backends.sqlite.journal import SQLiteJournal
from agents_reconcile._core.fingerprint import digest_items
from agents_reconcile._core.records import BackendIdentity, PendingWrite, Reason
from agents_reconcile._core.sealing import Keyring, PayloadKey
from agents_reconcile._session.runstate import CONTEXT_KEY
from agents_reconcile.errors import (
    ConfigurationError,
    ContinuationDenied,
    PayloadKeyUnknown,
    RecordTampered,
)
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.servers import POSTGRES_ENV, postgres_url

Scan = Callable[[str], Awaitable[list[str]]]


def card() -> str:
    return f"4111-{secrets.randbelow(10**12):012d}"


def files_holding(marker: str, *roots: Path) -> list[str]:
    """Every file under ``roots`` whose bytes hold ``marker``."""
    needle = marker.encode()
    found = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and needle in path.read_bytes():
                found.append(str(path))
    return found


def file_names(root: Path) -> set[str]:
    return {path.name for path in root.rglob("*") if path.is_file()}


def agent() -> Agent[Any]:
    return Agent(name="a", model=ScriptedModel([[assistant_message("noted")]] * 1))


async def run(
    session: ReconcilingSession, text: str, context: dict[str, Any] | None = None
) -> None:
    await Runner.run(
        agent(),
        text,
        session=session,
        run_config=session.run_config(),
        hooks=session.hooks(),
        context=context,
    )


class Conversation:
    """An ``EncryptedSession`` over a fault injector over a ``SQLiteSession`` file, wrapped."""

    def __init__(self, directory: Path, journal: IntentJournal | Path, *, encrypt: bool = True):
        self.session_id = f"chat-{uuid.uuid4().hex[:8]}"
        self.store = SQLiteSession(self.session_id, directory / "conversation.db")
        self.faulty = FaultInjectingSession(self.store)
        inner: Any = self.faulty
        if encrypt:
            key = Fernet.generate_key().decode()
            inner = EncryptedSession(self.session_id, self.faulty, encryption_key=key, ttl=3600)
        self.session = ReconcilingSession(inner, config=ReconcileConfig(journal=journal))

    async def texts(self) -> list[str]:
        items = await self.session.get_items()
        return [str(item.get("content")) for item in items if item.get("role") == "user"]


async def exercise(conversation: Conversation, scan: Scan) -> None:
    """Successful, rejected, lost-acknowledgement, in-flight and settled appends; after each,
    nothing readable anywhere."""
    session, faulty = conversation.session, conversation.faulty
    leaks: dict[str, list[str]] = {}

    ok = card()
    await run(session, f"charge {ok}")
    leaks["successful"] = await scan(ok)

    rejected, lost = card(), card()
    carried: dict[str, Any] = {}
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await run(session, f"charge {rejected}", carried)
    leaks["rejected, pending"] = await scan(rejected)
    entry = carried[CONTEXT_KEY]["pending"][0]
    assert "sealed" in entry and "batch" not in entry
    assert rejected.encode() not in orjson.dumps(carried)
    await run(session, "next")  # replays it
    leaks["rejected, settled"] = await scan(rejected)

    faulty.plan(Fault.LOST_ACK)
    with pytest.raises(BackendFailure):
        await run(session, f"charge {lost}")
    leaks["lost acknowledgement, pending"] = await scan(lost)
    await run(session, "next")  # finds it committed
    leaks["lost acknowledgement, settled"] = await scan(lost)

    hanging = card()
    faulty.plan(Fault.HANG)
    task = asyncio.create_task(run(session, f"charge {hanging}"))
    for _ in range(500):
        if Fault.HANG in faulty.faults_fired:  # its intent is open, its batch at the store
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the hanging append never reached the store")
    leaks["in flight"] = await scan(hanging)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await run(session, "next")
    leaks["in flight, settled"] = await scan(hanging)

    assert {case: where for case, where in leaks.items() if where} == {}
    # Sealed or not, nothing is lost and nothing is stored twice.
    texts = await conversation.texts()
    for marker in (ok, rejected, lost, hanging):
        assert sum(marker in text for text in texts) == 1, (marker, texts)
    assert await session.journal.pending(conversation.session_id) == []


async def control(directory: Path, journal: IntentJournal | Path, scan: Scan) -> None:
    """The same journal without encryption: a pending intent's batch is found by the scan."""
    plain = Conversation(directory, journal, encrypt=False)
    marker = card()
    plain.faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await run(plain.session, f"charge {marker}")
    assert await scan(marker), "the scan finds no plaintext even where the journal holds some"


# -- the SQLite journal (the default) ------------------------------------------------------


def scanning(*roots: Path, before: Callable[[], Awaitable[None]] | None = None) -> Scan:
    async def scan(marker: str) -> list[str]:
        if before is not None:
            await before()
        return files_holding(marker, *roots)

    return scan


async def test_sqlite_journal_files_hold_no_plaintext(tmp_path: Path) -> None:
    journal = tmp_path / "agents-reconcile.db"
    conversation = Conversation(tmp_path, journal)
    await exercise(conversation, scanning(tmp_path))
    assert f"{journal.name}-wal" in file_names(tmp_path)  # the scan covered the WAL
    await control(tmp_path, journal, scanning(tmp_path))


async def test_the_default_configuration_seals(tmp_path: Path) -> None:
    """No journal given: the default file in the working directory holds no plaintext."""
    session_id = "chat"
    store = SQLiteSession(session_id, tmp_path / "conversation.db")
    inner = EncryptedSession(session_id, store, encryption_key=Fernet.generate_key().decode())
    session = ReconcilingSession(inner)
    marker = card()
    await run(session, f"charge {marker}")
    assert (Path.cwd() / "agents-reconcile.db").exists()
    assert files_holding(marker, Path.cwd(), tmp_path) == []


# -- Redis, with an append-only file -------------------------------------------------------


@pytest.fixture
def aof_redis(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Redis server of this test's own, on loopback, that logs every write to its
    append-only file (fsync always); stopped by its PID."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (scripts/services.sh start installs it)")
    pytest.importorskip("redis")
    directory = tmp_path / "redis"
    directory.mkdir()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
    command += ["--appendonly", "yes", "--appendfsync", "always", "--dir", str(directory)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail("the append-only Redis server did not start")
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0", directory
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.redis
async def test_redis_append_only_file_holds_no_plaintext(
    tmp_path: Path, aof_redis: tuple[str, Path]
) -> None:
    from agents_reconcile._backends.redis.journal import RedisJournal

    url, directory = aof_redis
    store = tmp_path / "store"
    store.mkdir()
    journal = RedisJournal.from_url(url)
    try:
        await exercise(Conversation(store, journal), scanning(directory, store))
        assert list(directory.rglob("*.aof")), "no append-only file was written"
        await control(store, journal, scanning(directory, store))
    finally:
        await journal.close()


# -- PostgreSQL: data files and WAL after a checkpoint --------------------------------------


def data_directory() -> str | None:
    data = os.environ.get(POSTGRES_ENV.replace("_URL", "_DATA"))
    return data if data and os.path.isdir(data) else None


@pytest.fixture
async def postgres_journal() -> AsyncIterator[tuple[Any, Path]]:
    url = postgres_url()
    data = data_directory()
    if data is None:
        pytest.skip("the PostgreSQL data directory is not known (scripts/services.sh env)")
    from agents_reconcile._backends.postgres.journal import PostgresJournal

    journal = PostgresJournal(url, schema=f"seal_{uuid.uuid4().hex[:10]}")
    try:
        yield journal, Path(data)
    finally:
        await journal.drop()
        await journal.close()


@pytest.mark.postgres
async def test_postgres_files_hold_no_plaintext(
    tmp_path: Path, postgres_journal: tuple[Any, Path]
) -> None:
    import asyncpg

    journal, data = postgres_journal

    async def checkpoint() -> None:
        # Data pages (live and dead tuples) reach the files at a checkpoint; the WAL holds
        # every change from its commit on.
        conn = await asyncpg.connect(postgres_url())
        try:
            await conn.execute("CHECKPOINT")
        finally:
            await conn.close()

    scan = scanning(tmp_path, data, before=checkpoint)
    await exercise(Conversation(tmp_path, journal), scan)
    await control(tmp_path, journal, scan)


# -- keys: wrong, rotated, configured ------------------------------------------------------


async def rejected_append(tmp_path: Path, key: PayloadKey) -> tuple[SQLiteSession, str]:
    """A plain store with payload_key: an append rejected, its intent pending and sealed."""
    store = SQLiteSession("chat", tmp_path / "conversation.db")
    faulty = FaultInjectingSession(store)
    config = ReconcileConfig(journal=SQLiteJournal(tmp_path / "journal.db"), payload_key=key)
    session = ReconcilingSession(faulty, config=config)
    marker = card()
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await run(session, f"charge {marker}")
    assert files_holding(marker, tmp_path) == []
    return store, marker


async def test_a_wrong_key_is_a_typed_refusal_that_loses_nothing(tmp_path: Path) -> None:
    old, new = PayloadKey(os.urandom(32)), PayloadKey(os.urandom(32))
    store, marker = await rejected_append(tmp_path, old)

    def wrapper(keys: Any) -> ReconcilingSession:
        journal = SQLiteJournal(tmp_path / "journal.db")  # a process of its own: no keys yet
        config = ReconcileConfig(journal=journal, payload_key=keys)
        return ReconcilingSession(
            SQLiteSession("chat", tmp_path / "conversation.db"), config=config
        )

    with pytest.raises(ContinuationDenied) as denied:
        await run(wrapper(new), "next")
    assert denied.value.decision.reason is Reason.RECORD_UNTRUSTED
    assert old.key_id in str(denied.value)
    assert isinstance(denied.value.__cause__, PayloadKeyUnknown)
    assert await store.get_items() == []
    with sqlite3.connect(tmp_path / "journal.db") as conn:
        records = conn.execute("SELECT record FROM unresolved").fetchall()
    assert len(records) == 1 and marker.encode() not in records[0][0]
    # The journal still holds the intent: the rotated keyring opens and settles it.
    rotated = wrapper([new, old])
    await run(rotated, "next")
    texts = [item.get("content") for item in await store.get_items() if item.get("role") == "user"]
    assert texts == [f"charge {marker}", "next"]


def sealed_intent(key: PayloadKey, text: str) -> PendingWrite:
    batch = ({"role": "user", "content": text},)
    return PendingWrite(
        intent_id=uuid.uuid4().hex,
        session_id="chat",
        backend=BackendIdentity("store"),
        batch=batch,
        batch_digests=digest_items(batch),
        before_digests=(),
        before_is_whole=True,
        created_at=1.0,
        persisted_count=0,
        seal_key=key,
    )


def test_sealed_records_round_trip_and_keep_their_digest() -> None:
    key = PayloadKey(os.urandom(32))
    # A marker long enough that no random id, digest or ciphertext holds it by chance.
    marker = card()
    intent = sealed_intent(key, f"card {marker}")
    encoded = intent.encode()
    assert marker.encode() not in encoded and encoded == intent.encode()
    plain = dataclasses.replace(intent, seal_key=None)
    assert orjson.loads(encoded)["digest"] == plain.to_mapping()["digest"]
    opened = PendingWrite.decode(encoded, Keyring([key]))
    assert opened.batch == intent.batch and opened.encode() == encoded
    assert opened.same_content(plain)


def test_edited_or_moved_seals_are_refused() -> None:
    key = PayloadKey(os.urandom(32))
    one, two = sealed_intent(key, "one"), sealed_intent(key, "two")
    keyring = Keyring([key])
    edited = orjson.loads(one.encode())
    edited["created_at"] = 2.0
    with pytest.raises(RecordTampered):
        PendingWrite.decode(edited, keyring)
    moved = orjson.loads(one.encode())
    moved["sealed"] = orjson.loads(two.encode())["sealed"]
    with pytest.raises(RecordTampered):
        PendingWrite.decode(moved, keyring)
    flipped = orjson.loads(one.encode())
    data = flipped["sealed"]["data"]
    flipped["sealed"]["data"] = data[:-6] + ("A" if data[-6] != "A" else "B") + data[-5:]
    with pytest.raises(RecordTampered):
        PendingWrite.decode(flipped, keyring)
    both = orjson.loads(one.encode())
    both["batch"] = [{"role": "user", "content": "one"}]
    with pytest.raises(Exception, match="also holds its batch"):
        PendingWrite.decode(both, keyring)
    with pytest.raises(PayloadKeyUnknown) as unknown:
        PendingWrite.decode(one.encode())
    assert unknown.value.key_id == key.key_id


def test_keys_never_show_their_material() -> None:
    material = os.urandom(32)
    config = ReconcileConfig(payload_key=material)
    assert material.hex() not in repr(config) and repr(material) not in repr(config)
    assert config.payload_keys[0].key_id in repr(config)
    text = Fernet.generate_key().decode()
    assert text not in repr(ReconcileConfig(payload_key=text))
    assert PayloadKey(text) == PayloadKey(text) != PayloadKey(os.urandom(32))
    with pytest.raises(ConfigurationError):
        PayloadKey(b"short")
    with pytest.raises(ConfigurationError):
        ReconcileConfig(payload_key=[])
    with pytest.raises(ConfigurationError):
        ReconcileConfig(payload_key=42)  # type: ignore[arg-type]


async def test_encrypted_session_anywhere_in_the_chain_is_found(tmp_path: Path) -> None:
    store = SQLiteSession("chat", tmp_path / "conversation.db")
    encrypted = EncryptedSession("chat", store, encryption_key=Fernet.generate_key().decode())
    outer = FaultInjectingSession(encrypted)
    session = ReconcilingSession(outer, config=ReconcileConfig(journal=tmp_path / "j.db"))
    marker = card()
    outer.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await run(session, f"charge {marker}")
    assert files_holding(marker, tmp_path) == []
    [entry] = await session.journal.pending("chat")
    assert entry.intent.sealed_under is not None
    assert marker in str(entry.intent.batch)


class WithoutKeyring:
    """A custom journal (here a proxy of the memory journal) that has no keyring."""

    def __init__(self) -> None:
        from agents_reconcile._backends.memory.journal import MemoryJournal

        self._inner = MemoryJournal()

    def __getattr__(self, name: str) -> Any:
        if name == "keyring":
            raise AttributeError(name)
        return getattr(self._inner, name)


async def test_a_journal_that_cannot_open_seals_is_refused(tmp_path: Path) -> None:
    store = SQLiteSession("chat", tmp_path / "conversation.db")
    config = ReconcileConfig(journal=WithoutKeyring(), payload_key=os.urandom(32))  # type: ignore[arg-type]
    session = ReconcilingSession(store, config=config)
    with pytest.raises(ConfigurationError, match="has no keyring"):
        await session.add_items([{"role": "user", "content": "hi"}])
    assert await store.get_items() == []
