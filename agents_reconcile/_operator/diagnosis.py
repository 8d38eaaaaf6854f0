"""What an operator's journal address holds when it holds no journal, said instead of "run
`agents-reconcile migrate`": migrating a mistyped file, a forgotten ``--namespace`` or a
misspelled schema would make an empty journal in the wrong place, which the application never
reads. So a missing file names the journals beside it, a Redis prefix without a journal the
prefixes holding one, a PostgreSQL schema without one the schemas holding one, and a place
holding something else (a session store, other keys, other tables) says so; ``migrate`` is
suggested only for a place that is empty and where no other journal was found.

Every look is a read, and a bounded one: a few files of one directory, a ``SCAN`` over a
limited number of keys, one catalog query.
"""

from __future__ import annotations

import difflib
import itertools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from .._backends.opening import DEFAULT_JOURNAL_PATH
from .._backends.sqlite.journal import SQLiteJournal
from ..errors import JournalError

if TYPE_CHECKING:
    from .._backends.journal import IntentJournal

__all__ = ["WHICH_JOURNAL", "explained", "journals_in", "missing_file"]

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
_JOURNAL_TABLES: Final = frozenset({"intents", "decisions", "session_writes", "effects"})
_STORE_VERSION_TABLE: Final = "store_schema_version"
"""The version table of the revisioned PostgreSQL store."""
_STORE_VERSION_KEY: Final = "store-schema"
"""The last part of the revisioned Redis store's version key."""
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


async def explained(journal: IntentJournal, problem: str) -> str:
    """``problem`` (what the journal's ``check`` found) with what its place holds instead, when
    it holds no journal schema at all; ``problem`` itself otherwise, or when looking fails."""
    try:
        if isinstance(journal, _Prefixed) and await journal.schema_version() is None:
            return await _in_redis(journal)
        if isinstance(journal, _InSchema) and await journal.schema_version() is None:
            return await _in_postgres(journal) or problem
    except JournalError:
        pass
    return problem


async def _in_redis(journal: _Prefixed) -> str:
    prefix = journal.prefix
    held = await journal.keys_held(budget=_SCAN_BUDGET)
    journals, complete = await journal.journal_prefixes(most=_FOUND_AT_MOST, budget=_SCAN_BUDGET)
    others = [found for found in journals if found != prefix]
    elsewhere = f"; journals found under: {_listed(others, prefix)}" if others else ""
    if held:
        if f"{prefix}:{_STORE_VERSION_KEY}" in held:
            what = "a revisioned store's keys"
        else:
            what = f"other keys ({', '.join(held)}{', ...' if len(held) > 2 else ''})"
        return f"no journal under prefix {prefix!r}: it holds {what}{elsewhere}"
    if others:
        return (
            f"no journal under prefix {prefix!r}{elsewhere} (name the application's with "
            "--namespace)"
        )
    if not complete:
        return (
            f"no journal under prefix {prefix!r}, nor under another prefix among the "
            f"{_SCAN_BUDGET} keys looked at"
        )
    return f"no journal under prefix {prefix!r}, nor under any other prefix there; {_MIGRATE}"


async def _in_postgres(journal: _InSchema) -> str | None:
    schema = journal.schema
    tables = await journal.schema_tables()
    if tables and _JOURNAL_TABLES & set(tables):
        return None  # a journal's tables without its version table: check's own words
    found = await journal.journal_schemas(most=_FOUND_AT_MOST)
    others = [name for name in found if name != schema]
    elsewhere = f"; schemas holding a journal: {_listed(others, schema)}" if others else ""
    if tables is None:
        what = "there is no such schema"
    elif not tables:
        what = "the schema is empty"
    elif _STORE_VERSION_TABLE in tables:
        what = "it holds a revisioned store"
    else:
        shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
        what = f"it holds tables {shown}"
    if others:
        return (
            f"no journal in schema {schema!r}: {what}{elsewhere} (name the application's with "
            "--namespace)"
        )
    if tables:
        return f"no journal in schema {schema!r}: {what}, and no other schema holds one"
    return f"no journal in schema {schema!r}: {what}, and no other schema holds one; {_MIGRATE}"


def _listed(names: list[str], wanted: str) -> str:
    """``names``, the nearest to ``wanted`` first (a misspelling finds its name), at most
    ``_LISTED`` of them and how many more."""
    ranked = sorted(
        names, key=lambda name: (-difflib.SequenceMatcher(None, wanted, name).ratio(), name)
    )
    more = len(ranked) - _LISTED
    return ", ".join(ranked[:_LISTED]) + (f" and {more} more" if more > 0 else "")
