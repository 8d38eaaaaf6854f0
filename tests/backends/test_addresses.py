"""Journal and store addresses are read whole when they are given: a part the driver would
misread, ignore or refuse only at the first connection is refused at once, naming that part
and never a password; every form the library takes keeps working. A journal may not live in
the SQLite file an application's chat store keeps its history in."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents.memory import SQLiteSession

from agents_reconcile._backends.addresses import sqlite_file
from agents_reconcile._backends.memory.journal import MemoryJournal
from agents_reconcile._backends.registry import (
    backend_for,
    backend_named,
    check_address,
    parse_address,
)
from agents_reconcile._backends.sqlite.backend import path_of
from agents_reconcile._backends.sqlite.journal import SQLiteJournal
from agents_reconcile._backends.sqlite.store import RevisionedSQLiteSession
from agents_reconcile._session.config import ReconcileConfig
from agents_reconcile._session.journal_place import refuse_journal_in_store
from agents_reconcile.errors import ConfigurationError
from agents_reconcile.testing import FaultInjectingSession

PASSWORD = "hunter2-secret"


def refusal(journal: Any) -> str:
    """The message of the ConfigurationError that ``ReconcileConfig(journal=...)`` raises."""
    with pytest.raises(ConfigurationError) as raised:
        ReconcileConfig(journal=journal)
    return str(raised.value)


# -- each refused form, refused when the config is built ---------------------------------------


@pytest.mark.parametrize("database", ["abc", "1.5", "0x1", "one"])
def test_a_redis_database_that_is_not_a_number_is_refused_when_the_config_is_built(
    database: str,
) -> None:
    """redis-py reads ``redis://host/abc`` as database 0, silently: refused, naming it."""
    message = refusal(f"redis://127.0.0.1:6390/{database}")
    assert message.startswith(f"journal 'redis://127.0.0.1:6390/{database}': "), message
    assert f"the database {database!r} (the URL's path)" in message
    assert "redis://HOST:PORT/N" in message


def test_a_negative_redis_database_is_refused_when_the_config_is_built() -> None:
    message = refusal("redis://127.0.0.1:6390/-1")
    assert "the database '-1' (the URL's path) is not a database number" in message


def test_a_redis_database_in_the_query_that_is_not_a_number_is_refused() -> None:
    message = refusal("redis://127.0.0.1:6390?db=x")
    assert "the database 'x' (db= in the query)" in message


def test_a_redis_database_given_twice_and_differently_is_refused() -> None:
    """The driver would use the query's and ignore the path's: which one was meant is unknown."""
    message = refusal("redis://127.0.0.1:6390/1?db=2")
    assert "the database is given twice" in message


@pytest.mark.parametrize("port", ["0", "65536", "70000"])
def test_a_redis_port_out_of_range_is_refused_when_the_config_is_built(port: str) -> None:
    """Port 0 would be no port at all to redis-py (it would use 6379)."""
    message = refusal(f"redis://127.0.0.1:{port}/0")
    assert f"the port {port!r} is not a number from 1 to 65535" in message


def test_a_redis_port_that_is_not_a_number_is_refused_when_the_config_is_built() -> None:
    message = refusal("redis://127.0.0.1:abc/0")
    assert "the port 'abc' is not a number from 1 to 65535" in message


def test_a_redis_query_setting_the_driver_does_not_take_is_refused() -> None:
    """The driver would take it and fail at the first connection."""
    message = refusal("redis://127.0.0.1:6390/0?foo=bar")
    assert "the query parameter 'foo'" in message


def test_a_redis_query_setting_the_driver_cannot_read_is_refused() -> None:
    message = refusal("redis://127.0.0.1:6390/0?socket_timeout=soon")
    assert "the query parameter 'socket_timeout'" in message


@pytest.mark.parametrize("address", ["unix://", "unix://redis.sock"])
def test_a_unix_socket_url_without_the_socket_path_is_refused(address: str) -> None:
    message = refusal(address)
    assert "socket's absolute path" in message
    assert "unix:///path/to/redis.sock" in message


@pytest.mark.parametrize("journal", ["", " ", "\t\n"])
def test_an_empty_or_blank_journal_is_refused_when_the_config_is_built(journal: str) -> None:
    message = refusal(journal)
    assert message.startswith(f"journal {journal!r}: the address is "), message
    assert "empty" in message or "blank" in message


def test_an_sqlite_url_with_the_path_in_its_host_part_is_refused_naming_the_right_form() -> None:
    """What follows ``sqlite://`` is the path once its leading '/' is taken off:
    ``sqlite://relative.db`` puts the name where a host would be."""
    message = refusal("sqlite://relative.db")
    assert "the path 'relative.db' is in the URL's host part" in message
    assert "sqlite:///relative.db" in message
    assert "sqlite:////absolute/path.db" in message


@pytest.mark.parametrize("address", ["sqlite:///", "sqlite://"])
def test_an_sqlite_url_without_a_path_is_refused_when_the_config_is_built(address: str) -> None:
    message = refusal(address)
    assert message.startswith(f"journal {address!r}: the URL names no file"), message


@pytest.mark.parametrize("address", ["sqlite:///journal.db?mode=ro", "sqlite:///journal.db#x"])
def test_an_sqlite_url_with_a_query_is_refused_rather_than_kept_in_the_file_name(
    address: str,
) -> None:
    assert "takes no query ('?') or fragment ('#')" in refusal(address)


def test_a_journal_path_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    assert "names a directory, not a database file" in refusal(str(tmp_path))
    assert "names a directory, not a database file" in refusal(tmp_path)
    assert "names a directory, not a database file" in refusal("sqlite:////")
    assert "names a directory, not a database file" in refusal("journals/")


@pytest.mark.parametrize(
    ("path", "words"),
    [
        (":memory:", "memory://NAME"),
        ("memory:", "write memory://"),
        ("redis:localhost:6379", "write redis://"),
        ("postgresql:/db", "write postgresql://"),
    ],
)
def test_a_path_that_reads_like_a_url_without_its_slashes_is_refused(path: str, words: str) -> None:
    """Taken as it is, it would be a file of that name in the working directory."""
    assert words in refusal(path)


def test_a_postgresql_url_without_a_database_name_is_refused_when_the_config_is_built() -> None:
    for address in ("postgresql://agent@127.0.0.1:5440", "postgresql://127.0.0.1:5440/"):
        message = refusal(address)
        assert "names no database" in message, message
        assert "postgresql://USER@HOST:PORT/DATABASE" in message


@pytest.mark.parametrize(
    ("address", "port"),
    [
        ("postgresql://h:abc/db", "abc"),
        ("postgresql://h:70000/db", "70000"),
        ("postgres://h1:5432,h2:x/db", "x"),
        ("postgresql://[::1]:abc/db", "abc"),
        ("postgresql:///db?host=/run/postgresql&port=nope", "nope"),
    ],
)
def test_a_postgresql_port_that_is_not_a_port_is_refused_when_the_config_is_built(
    address: str, port: str
) -> None:
    assert f"the port {port!r} is not a number from 1 to 65535" in refusal(address)


def test_a_postgresql_host_list_with_an_empty_entry_is_refused() -> None:
    assert "has an empty entry" in refusal("postgresql://h1,,h2/db")


def test_a_postgresql_query_that_asyncpg_would_not_read_is_refused() -> None:
    assert "not NAME=VALUE" in refusal("postgresql://h/db?sslmode=require&&x=1")


def test_a_schema_in_a_postgresql_url_is_refused_naming_where_the_schema_is_given() -> None:
    """``?schema=`` would reach the server as a setting it does not have, and every statement
    would fail as if the journal were damaged: it is refused when the config is built, saying
    where a schema is given instead."""
    message = refusal("postgresql://agent@127.0.0.1:5440/db?schema=tenant_a")
    assert "?schema= is not read from a PostgreSQL address" in message
    assert "schema=" in message and "--namespace" in message


def test_an_unknown_scheme_is_refused_naming_the_scheme_and_the_known_ones() -> None:
    message = refusal("mysql://db.example/agents")
    assert "unknown journal URL scheme 'mysql'" in message
    assert "postgresql://" in message and "redis://" in message


@pytest.mark.parametrize(
    "address",
    [
        f"redis://agent:{PASSWORD}@127.0.0.1:6390/abc",
        f"redis://:{PASSWORD}@127.0.0.1:70000/0",
        f"redis://127.0.0.1:6390/0?password={PASSWORD}&foo=1",
        f"postgresql://agent:{PASSWORD}@h:abc/db",
        f"postgresql://agent:{PASSWORD}@h:5432",
        f"postgresql://agent:{PASSWORD}@[::1/db",
        f"postgresql://agent:p@{PASSWORD}@h/db",
        f"ftp://agent:{PASSWORD}@host/journal",
    ],
)
def test_a_refused_address_is_never_shown_with_its_password(address: str) -> None:
    message = refusal(address)
    assert PASSWORD not in message, message
    with pytest.raises(ConfigurationError) as raised:
        check_address(address)
    assert PASSWORD not in str(raised.value)


# -- every way in refuses the same -----------------------------------------------------------


OPENED_ELSEWHERE = [
    ("redis", "redis://127.0.0.1:6390/abc", "the database 'abc'"),
    ("redis", "redis://127.0.0.1:6390/-2", "the database '-2'"),
    ("redis", "unix://redis.sock", "socket's absolute path"),
    ("postgres", "postgresql://127.0.0.1:abc/db", "the port 'abc'"),
    ("postgres", "postgresql://127.0.0.1:5440", "names no database"),
    ("sqlite", "sqlite://relative.db", "is in the URL's host part"),
    ("sqlite", "sqlite:///", "names no file"),
]


@pytest.mark.parametrize(("backend", "address", "words"), OPENED_ELSEWHERE)
def test_every_public_from_address_refuses_an_address_the_config_refuses(
    backend: str, address: str, words: str
) -> None:
    """The registry, each journal's and each store's ``from_address`` refuse it too, before
    anything is connected."""
    found = backend_named(backend)
    if not found.available():
        pytest.skip(f"{backend}: no driver")
    attempts: list[Any] = [
        lambda: found.open_journal(address),
        lambda: found.open_store("s", address),
        lambda: found.journal_class().from_address(address),
        lambda: found.store_class().from_address("s", address),
    ]
    for attempt in attempts:
        with pytest.raises(ConfigurationError) as raised:
            attempt()
        assert words in str(raised.value)


@pytest.mark.parametrize(
    ("kind", "address"),
    [
        ("journal", "redis://127.0.0.1:6390/abc"),
        ("store", "redis://127.0.0.1:6390/abc"),
        ("journal", "postgresql://127.0.0.1:abc/db"),
        ("store", "postgresql://127.0.0.1:abc/db"),
    ],
)
def test_from_url_refuses_it_as_well(kind: str, address: str) -> None:
    backend = backend_for(address)
    if not backend.available():
        pytest.skip(f"{backend.name}: no driver")
    if kind == "journal":
        with pytest.raises(ConfigurationError):
            backend.journal_class().from_url(address)
    else:
        with pytest.raises(ConfigurationError):
            backend.store_class().from_url("s", address)


def test_a_refusal_outside_the_config_names_the_address_and_what_it_is_for() -> None:
    with pytest.raises(ConfigurationError) as raised:
        check_address("redis://127.0.0.1:6390/abc", what="store")
    assert str(raised.value).startswith("store address 'redis://127.0.0.1:6390/abc': ")
    with pytest.raises(ConfigurationError) as raised:
        path_of("sqlite://relative.db")
    assert str(raised.value).startswith("SQLite address 'sqlite://relative.db': ")


# -- the forms the library takes ---------------------------------------------------------------


ACCEPTED = [
    "sqlite:///rel.db",
    "sqlite:////abs.db",
    "SQLITE:///rel.db",
    "plain.db",
    "sub/plain.db",
    "memory://somewhere",
    "redis://127.0.0.1:6390/0",
    "redis://127.0.0.1:6390",
    "redis://127.0.0.1:6390/",
    "redis://",
    f"redis://:{PASSWORD}@127.0.0.1:6390/2",
    f"redis://agent:{PASSWORD}@127.0.0.1:6390/15?socket_timeout=2.5&protocol=3",
    "redis://127.0.0.1:6390?db=3",
    "redis://127.0.0.1:6390/3?db=3",
    "redis://[::1]:6390/1",
    "rediss://cache.example:6380/1?ssl_cert_reqs=none",
    "unix:///run/redis/redis.sock?db=1",
    "postgresql://agent@127.0.0.1:5440/agents_reconcile?options=-c%20statement_timeout%3D5000",
    f"postgresql://agent:{PASSWORD}@127.0.0.1:5440/db?sslmode=disable&application_name=x",
    "postgres://db.example/agents",
    "postgresql://h1:5432,h2:5433/db",
    "postgresql://[::1]:5432/db",
    "postgresql:///db?host=/run/postgresql",
    "postgresql://127.0.0.1:5440?dbname=agents",
]


@pytest.mark.parametrize("address", ACCEPTED)
async def test_the_forms_the_library_takes_are_still_accepted(address: str) -> None:
    """The config takes them, and so does the journal that opens them (nothing connects)."""
    assert ReconcileConfig(journal=address).journal == address
    backend = parse_address(address)
    if not backend.available():
        return
    journal = backend.open_journal(address)
    await journal.close()


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("sqlite:///rel.db", Path("rel.db")),
        ("sqlite:////abs/file.db", Path("/abs/file.db")),
        ("plain.db", Path("plain.db")),
        ("sqlite:///sub/../rel.db", Path("sub/../rel.db")),
    ],
)
def test_an_sqlite_address_names_the_file_path_of_reads(address: str, expected: Path) -> None:
    """``sqlite:///`` starts a path relative to the working directory, ``sqlite:////`` an
    absolute one."""
    assert sqlite_file(address) == expected
    assert path_of(address) == expected


def test_a_config_shows_an_sqlite_url_as_it_was_written() -> None:
    assert "journal='sqlite:///journal.db'" in repr(ReconcileConfig(journal="sqlite:///journal.db"))


# -- a journal in the chat store's own file ------------------------------------------------


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[SQLiteSession]:
    """An SDK SQLiteSession on ``chat.db`` in the working directory."""
    session = SQLiteSession("user-42", tmp_path / "chat.db")
    yield session
    session.close()


def spellings(path: Path) -> list[Any]:
    """The ways a configuration may name ``path`` as its journal."""
    return [
        path,
        str(path),
        f"sqlite:///{path}",
        os.path.relpath(path),
        f"sqlite:///{os.path.relpath(path)}",
        path.parent / "." / "x" / ".." / path.name,
    ]


def test_a_journal_in_the_sdk_sqlite_sessions_file_is_refused(
    chat: SQLiteSession, tmp_path: Path
) -> None:
    (tmp_path / "x").mkdir()
    for journal in spellings(tmp_path / "chat.db"):
        with pytest.raises(ConfigurationError) as raised:
            refuse_journal_in_store(journal, chat)
        message = str(raised.value)
        assert str((tmp_path / "chat.db").resolve()) in message or "chat.db" in message
        assert "SQLiteSession" in message
        assert "file of its own" in message


def test_a_journal_reaching_the_chat_file_through_a_symbolic_link_is_refused(
    chat: SQLiteSession, tmp_path: Path
) -> None:
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "chat.db")
    with pytest.raises(ConfigurationError):
        refuse_journal_in_store(link, chat)


def test_the_default_journal_in_the_chat_file_is_refused(tmp_path: Path) -> None:
    """With no journal configured, the default file of the working directory is the one."""
    session = SQLiteSession("user-42", "agents-reconcile.db")
    try:
        with pytest.raises(ConfigurationError):
            refuse_journal_in_store(None, session)
    finally:
        session.close()


def test_a_journal_object_on_the_chat_file_is_refused(chat: SQLiteSession, tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "chat.db")
    with pytest.raises(ConfigurationError):
        refuse_journal_in_store(journal, chat)


def test_a_chat_store_under_wrappers_is_found(chat: SQLiteSession, tmp_path: Path) -> None:
    """An ``EncryptedSession`` (or any wrapper) over the SQLite session: its file still."""
    from agents.extensions.memory.encrypt_session import EncryptedSession

    encrypted = EncryptedSession("user-42", chat, encryption_key="k" * 44)
    for store in (encrypted, FaultInjectingSession(chat), FaultInjectingSession(encrypted)):
        with pytest.raises(ConfigurationError):
            refuse_journal_in_store(tmp_path / "chat.db", store)


async def test_the_sdk_extensions_sqlite_stores_are_refused_too(tmp_path: Path) -> None:
    from agents.extensions.memory import (
        AdvancedSQLiteSession,
        AsyncSQLiteSession,
        SQLAlchemySession,
    )

    advanced = AdvancedSQLiteSession(
        session_id="s", db_path=tmp_path / "advanced.db", create_tables=True
    )
    awaiting = AsyncSQLiteSession("s", tmp_path / "async.db")
    alchemy = SQLAlchemySession.from_url("s", url=f"sqlite+aiosqlite:///{tmp_path / 'sa.db'}")
    try:
        for store, name in ((advanced, "advanced.db"), (awaiting, "async.db"), (alchemy, "sa.db")):
            with pytest.raises(ConfigurationError) as raised:
                refuse_journal_in_store(f"sqlite:///{tmp_path / name}", store)
            assert type(store).__name__ in str(raised.value)
            refuse_journal_in_store(tmp_path / "journal.db", store)
    finally:
        advanced.close()
        await awaiting.close()
        await alchemy.engine.dispose()


@pytest.fixture
async def revisioned(tmp_path: Path) -> AsyncIterator[RevisionedSQLiteSession]:
    store = RevisionedSQLiteSession("s", tmp_path / "chat.db")
    yield store
    await store.close()


async def test_a_journal_apart_from_the_chat_store_is_accepted(
    chat: SQLiteSession, tmp_path: Path, revisioned: RevisionedSQLiteSession
) -> None:
    """Another file, a server journal, a journal object of another kind, an in-memory chat
    store, and this package's revisioned store (whose tables keep apart from the journal's,
    in one file by design) are all fine."""
    memory_chat = SQLiteSession("user-42")
    try:
        for journal, store in [
            (tmp_path / "journal.db", chat),
            ("sqlite:///journal.db", chat),
            (None, chat),
            ("redis://127.0.0.1:6390/0", chat),
            ("memory://here", chat),
            (MemoryJournal(), chat),
            (None, memory_chat),
            (tmp_path / "chat.db", revisioned),
        ]:
            refuse_journal_in_store(journal, store)
    finally:
        memory_chat.close()


def test_a_wrapper_whose_journal_is_its_chat_stores_own_file_is_refused_before_anything_is_opened(
    tmp_path: Path,
) -> None:
    from agents import SQLiteSession

    from agents_reconcile import ReconcileConfig, ReconcilingSession

    chat = tmp_path / "chat.db"
    for spelled in (str(chat), f"sqlite:///{chat}", chat):
        with pytest.raises(ConfigurationError, match="chat history"):
            ReconcilingSession(SQLiteSession("s", chat), config=ReconcileConfig(journal=spelled))
    tables = sqlite3.connect(chat).execute("SELECT name FROM sqlite_master").fetchall()
    assert not any("intent" in name for (name,) in tables), "no journal table was added"
    ReconcilingSession(
        SQLiteSession("s", chat), config=ReconcileConfig(journal=tmp_path / "journal.db")
    )
