"""What an operator's journal or store address holds when it holds no journal (or no store),
said instead of "run `agents-reconcile migrate`": migrating a mistyped file, a forgotten
``--namespace`` or a misspelled schema would make an empty journal in the wrong place, which the
application never reads. So a missing file names the journals beside it, a Redis prefix without
a journal the prefixes holding one, a PostgreSQL schema without one the schemas holding one,
and a place holding something else (a session store, other keys, other tables) says so;
``migrate`` is suggested only for a place that is empty and where no other journal was found.
A revisioned store's address is said the same way (``--store-namespace``), never with
``migrate``: a store that is not there holds no session to look at. A plain ``redis://``
address of one node of a Redis Cluster is named as such, with the ``redis+cluster://`` address
to give instead: read through one node, a cluster's journal shows its buckets' prefixes
(``P:{b017}``), which no command can follow.

Every look is a read, and a bounded one: a few files of one directory, a ``SCAN`` over a
limited number of keys, one catalog query.
"""

from __future__ import annotations

import difflib
import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from .._backends.addresses import split_prefix
from .._backends.opening import DEFAULT_JOURNAL_PATH
from .._backends.postgres.database import SCHEMA_TABLES, SCHEMAS_HOLDING
from .._backends.sqlite.journal import SQLiteJournal
from ..errors import JournalError, ReconcileError
from .server_reads import (
    cluster_address,
    postgres_rows,
    redis_cluster_enabled,
    redis_keys,
    redis_prefixes,
    served_by,
)

if TYPE_CHECKING:
    from .._backends.journal import IntentJournal

__all__ = [
    "WHICH_JOURNAL",
    "cluster_node",
    "explained",
    "journals_in",
    "missing_file",
    "store_explained",
]

WHICH_JOURNAL: Final = (
    "the journal is the file given to ReconcileConfig(journal=...), by default "
    f"{DEFAULT_JOURNAL_PATH} in the application's working directory"
)
_SUFFIXES: Final = (".db", ".sqlite", ".sqlite3")
_ENTRIES_LOOKED_AT: Final = 1000
"""Directory entries read while looking for journals beside a missing file."""
_FILES_OPENED: Final = 20
"""SQLite files opened (read only, leaving nothing) to see whether they hold a journal."""
_LISTED: Final = 5
"""Places holding a journal named in a diagnosis, the nearest to the name given first."""
_FOUND_AT_MOST: Final = 10_000
"""Places holding a journal looked up on a server (names only). All of them are ranked by
nearness before five are named, so a database with many journal schemas still names the one
a misspelling meant (with 100 read in name order, it could be left out)."""
_SCAN_BUDGET: Final = 10_000
"""Redis keys a ``SCAN`` looks at while looking for a prefix, or for journals."""
_JOURNAL_TABLES: Final = frozenset({"intents", "decisions", "session_writes", "slots", "effects"})
_STORE_VERSION_TABLE: Final = "store_schema_version"
"""The version table of the revisioned PostgreSQL store."""
_STORE_VERSION_KEY: Final = "store-schema"
"""The last part of the revisioned Redis store's version key."""
_JOURNAL_VERSION_KEY: Final = "schema"
"""The last part of the Redis journal's version key (on one server)."""
_STORE_TABLES: Final = frozenset({"sessions", "items", "writes"})
_BUCKET_TAG: Final = re.compile(r":\{b[0-9]{3}\}$")
"""How a prefix found on one node of a Redis Cluster ends: a bucket's hash tag of a journal laid
out on the cluster (``_backends/redis/cluster/layout.py``)."""
_REDIS: Final = ("redis", "redis-cluster")
_MIGRATE: Final = (
    "the application creates its journal on first use, and `agents-reconcile migrate` with "
    "the same --journal and --namespace creates it now"
)


@runtime_checkable
class _Prefixed(Protocol):
    """A Redis journal's reads for a diagnosis."""

    prefix: str

    async def schema_version(self) -> int | None: ...

    async def keys_held(self, *, most: int = ..., budget: int = ...) -> list[str]: ...

    async def journal_prefixes(
        self, *, most: int = ..., budget: int = ...
    ) -> tuple[list[str], bool]: ...


@runtime_checkable
class _InSchema(Protocol):
    """A PostgreSQL journal's reads for a diagnosis."""

    schema: str

    async def schema_version(self) -> int | None: ...

    async def schema_tables(self) -> list[str] | None: ...

    async def journal_schemas(self, *, most: int = ...) -> list[str]: ...


async def missing_file(path: Path) -> str:
    """Why there is no journal at ``path`` (no file, or a directory), and which files beside
    it (or in it) hold one."""
    if _is_directory(path):
        found = await journals_in(path)
        holds = (
            f"journals in it: {_listed(found, '')}" if found else f"none in it ({WHICH_JOURNAL})"
        )
        return f"{path} is a directory, not a journal file; {holds}"
    directory = path.parent
    if not _is_directory(directory):
        return f"no journal file at {path}: there is no directory {directory}"
    found = await journals_in(directory)
    if found:
        return f"no journal file at {path}; journals in {directory}: {_listed(found, path.name)}"
    return f"no journal file at {path}, nor any journal beside it ({WHICH_JOURNAL})"


async def journals_in(directory: Path) -> list[str]:
    """The names of the files in ``directory`` holding a journal of this release's schema
    (among the first SQLite-looking files found), sorted. Reads only, and leaves nothing."""
    found = []
    for name in _candidates(directory):
        journal = SQLiteJournal(directory / name, read_only=True)
        try:
            if await journal.check() is None:
                found.append(name)
        finally:
            await journal.close()
    return found


def _is_directory(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _candidates(directory: Path) -> list[str]:
    """The first files of ``directory`` named as SQLite files are, sorted, at most
    ``_FILES_OPENED`` of them."""
    try:
        with os.scandir(directory) as entries:
            names = sorted(
                entry.name
                for entry in itertools.islice(entries, _ENTRIES_LOOKED_AT)
                if entry.name.endswith(_SUFFIXES) and entry.is_file()
            )
    except OSError:
        return []
    return names[:_FILES_OPENED]


async def explained(journal: IntentJournal, problem: str, address: str | None = None) -> str:
    """``problem`` (what the journal's ``check`` found) with what its place holds instead, when
    it holds no journal schema at all; ``problem`` itself otherwise, or when looking fails.
    ``address``: the journal's, to ask a plain Redis server whether it is a cluster's node."""
    try:
        if isinstance(journal, _Prefixed) and await journal.schema_version() is None:
            return await _in_redis(journal, address)
        if isinstance(journal, _InSchema) and await journal.schema_version() is None:
            return await _in_postgres(journal) or problem
    except JournalError:
        pass
    return problem


async def store_explained(store: Any, address: str, problem: str) -> str:
    """``problem`` (what a revisioned store's ``check`` found) with what its place holds
    instead, when it holds no store schema at all: the prefixes or schemas that do hold a
    store (a forgotten or misspelled ``--store-namespace``); ``problem`` itself otherwise, or
    when looking fails. Never ``migrate``: an empty place holds no session to look at."""
    try:
        if await store.schema_version() is not None:
            return problem
        served = served_by(address)
        if served in _REDIS and isinstance(getattr(store, "prefix", None), str):
            return await _store_in_redis(address, store.prefix)
        if served == "postgres" and isinstance(getattr(store, "schema", None), str):
            return await _store_in_postgres(address, store.schema) or problem
    except (ReconcileError, OSError):
        pass
    return problem


async def cluster_node(address: str, noun: str, option: str) -> str | None:
    """What to say when a plain Redis address (``redis://``) is one node of a Redis Cluster,
    which it says it is: the ``redis+cluster://`` address to give instead (None when it is
    no such node, when the address is not a plain Redis one, or when it cannot be asked)."""
    if served_by(address) != "redis":
        return None
    try:
        if not await redis_cluster_enabled(address):
            return None
    except (ReconcileError, OSError):
        return None
    return _on_a_node(address, noun, option, [])


@dataclass(frozen=True)
class _Place:
    """How a diagnosis names what it looked for: a journal (``--namespace``), or a revisioned
    store (``--store-namespace``), and what it says of a server holding none anywhere."""

    noun: str
    option: str
    nowhere: str


_JOURNAL: Final = _Place("journal", "--namespace", _MIGRATE)
_JOURNAL_IN_ADDRESS: Final = _Place("journal", "the address's ?prefix=", _MIGRATE)
"""A journal whose address names its prefix, where ``--namespace`` too would be refused."""
_STORE: Final = _Place(
    "revisioned store", "--store-namespace", "no session is stored at this address"
)


async def _in_redis(journal: _Prefixed, address: str | None) -> str:
    held = await journal.keys_held(budget=_SCAN_BUDGET)
    journals, complete = await journal.journal_prefixes(most=_FOUND_AT_MOST, budget=_SCAN_BUDGET)
    tagged = [found for found in journals if _BUCKET_TAG.search(found)]
    plain = address is not None and served_by(address) == "redis"
    if address is not None and plain and (tagged or await _asked_cluster(address)):
        return f"no journal under prefix {journal.prefix!r}: " + _on_a_node(
            address, "journal", "--namespace", tagged
        )
    if f"{journal.prefix}:{_STORE_VERSION_KEY}" in held:
        what = "a revisioned store's keys"
    else:
        what = f"other keys ({', '.join(held)}{', ...' if len(held) > 2 else ''})"
    named_in_address = address is not None and split_prefix(address)[1] is not None
    place = _JOURNAL_IN_ADDRESS if named_in_address else _JOURNAL
    return _redis_words(place, journal.prefix, held, what, journals, complete)


async def _store_in_redis(address: str, prefix: str) -> str:
    held = await redis_keys(address, prefix, most=3, budget=_SCAN_BUDGET)
    stores, complete = await redis_prefixes(
        address, _STORE_VERSION_KEY, most=_FOUND_AT_MOST, budget=_SCAN_BUDGET
    )
    if f"{prefix}:{_JOURNAL_VERSION_KEY}" in held:
        what = "a journal's keys"
    else:
        what = f"other keys ({', '.join(held)}{', ...' if len(held) > 2 else ''})"
    return _redis_words(_STORE, prefix, held, what, stores, complete)


def _redis_words(
    place: _Place, prefix: str, held: list[str], what: str, found: list[str], complete: bool
) -> str:
    """Why there is no ``place`` under ``prefix``: what the prefix holds instead (``what``,
    when it ``held`` keys), and the prefixes ``found`` holding one."""
    others = [name for name in found if name != prefix]
    plural = f"{place.noun}s" if place.noun == "journal" else "stores"
    elsewhere = f"; {plural} found under: {_listed(others, prefix)}" if others else ""
    if held:
        return f"no {place.noun} under prefix {prefix!r}: it holds {what}{elsewhere}"
    if others:
        return (
            f"no {place.noun} under prefix {prefix!r}{elsewhere} (name the application's with "
            f"{place.option})"
        )
    if not complete:
        return (
            f"no {place.noun} under prefix {prefix!r}, nor under another prefix among the "
            f"{_SCAN_BUDGET} keys looked at"
        )
    return (
        f"no {place.noun} under prefix {prefix!r}, nor under any other prefix there; "
        f"{place.nowhere}"
    )


def _on_a_node(address: str, noun: str, option: str, tagged: list[str]) -> str:
    """That ``address`` is one node of a Redis Cluster, and the address of the cluster to give
    instead, with the prefixes seen on the node without their buckets' hash tags."""
    carried = (
        f" (the prefixes found there carry its buckets' hash tags: {_listed(tagged, '')})"
        if tagged
        else ""
    )
    seen = sorted({_BUCKET_TAG.sub("", found) for found in tagged})
    named = (
        f" ({', '.join(seen[:_LISTED])}{', ...' if len(seen) > _LISTED else ''} seen on this node)"
        if seen
        else ""
    )
    return (
        f"this address is one node of a Redis Cluster{carried}; a {noun} on a cluster "
        f"is read through the whole cluster: give its address, {cluster_address(address)} "
        f"(more of its nodes may follow, comma-separated), with {option} naming the "
        f"prefix{named}"
    )


async def _asked_cluster(address: str) -> bool:
    try:
        return await redis_cluster_enabled(address)
    except (ReconcileError, OSError):
        return False


async def _in_postgres(journal: _InSchema) -> str | None:
    tables = await journal.schema_tables()
    if tables and _JOURNAL_TABLES & set(tables):
        return None  # a journal's tables without its version table: check's own words
    found = await journal.journal_schemas(most=_FOUND_AT_MOST)
    if tables is not None and _STORE_VERSION_TABLE in tables:
        what = "it holds a revisioned store"
    else:
        what = _schema_holds(tables)
    return _postgres_words(_JOURNAL, journal.schema, tables, what, found)


async def _store_in_postgres(address: str, schema: str) -> str | None:
    rows = await postgres_rows(address, schema, SCHEMA_TABLES, schema)
    tables = None if not rows else [str(row[0]) for row in rows if row[0] is not None]
    if tables and _STORE_TABLES & set(tables):
        return None  # a store's tables without its version table: check's own words
    found = await postgres_rows(
        address, schema, SCHEMAS_HOLDING, "items", _STORE_VERSION_TABLE, _FOUND_AT_MOST
    )
    if tables is not None and _JOURNAL_TABLES & set(tables):
        what = "it holds a journal"
    else:
        what = _schema_holds(tables)
    return _postgres_words(_STORE, schema, tables, what, [str(row[0]) for row in found])


def _schema_holds(tables: list[str] | None) -> str:
    if tables is None:
        return "there is no such schema"
    if not tables:
        return "the schema is empty"
    shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
    return f"it holds tables {shown}"


def _postgres_words(
    place: _Place, schema: str, tables: list[str] | None, what: str, found: list[str]
) -> str:
    """Why there is no ``place`` in ``schema``: what the schema holds (``what``), and the
    schemas ``found`` holding one."""
    others = [name for name in found if name != schema]
    elsewhere = f"; schemas holding a {place.noun}: {_listed(others, schema)}" if others else ""
    if others:
        return (
            f"no {place.noun} in schema {schema!r}: {what}{elsewhere} (name the application's "
            f"with {place.option})"
        )
    if tables:
        return f"no {place.noun} in schema {schema!r}: {what}, and no other schema holds one"
    return (
        f"no {place.noun} in schema {schema!r}: {what}, and no other schema holds one; "
        f"{place.nowhere}"
    )


def _listed(names: list[str], wanted: str) -> str:
    """``names``, the nearest to ``wanted`` first (a misspelling finds its name), at most
    ``_LISTED`` of them and how many more."""
    ranked = sorted(
        names, key=lambda name: (-difflib.SequenceMatcher(None, wanted, name).ratio(), name)
    )
    more = len(ranked) - _LISTED
    return ", ".join(ranked[:_LISTED]) + (f" and {more} more" if more > 0 else "")
