"""Versioned schemas: one model for every journal and store, SQL tables or Redis keys alike.

A schema is a list of steps whose position is the version: version N means the first N steps
are applied. SQL backends ship each step as a file (``<package>/<folder>/<step>.sql``); on
Redis a step has nothing to run but the version key it leaves. Every backend reads the version
it finds into the same four states and words its problems the same way, so ``check`` and
``migrate`` say the same things on every backend.
"""

from __future__ import annotations

import enum
import sqlite3
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Final, Protocol, runtime_checkable

from ..errors import ConfigurationError

__all__ = ["MIGRATE_HINT", "Schema", "SchemaState", "Unversioned", "Versioned"]

MIGRATE_HINT: Final = "run `agents-reconcile migrate`"
UPGRADE_HINT: Final = "upgrade agents-reconcile"


class SchemaState(enum.Enum):
    """What a found version means to this release."""

    ABSENT = "absent"
    OLDER = "older"
    CURRENT = "current"
    NEWER = "newer"


@runtime_checkable
class Versioned(Protocol):
    """What every journal and store offers for its schema (``agents-reconcile migrate``)."""

    async def schema_version(self) -> int | None:
        """The version the backend holds (None when it holds none); writes nothing."""
        ...

    async def check(self) -> str | None:
        """None when the schema is this release's; else a sentence saying what is missing
        or newer. Runs no DDL and writes nothing."""
        ...

    async def migrate(self) -> list[str]:
        """Apply the missing steps; return what was applied (none when current). A newer
        schema is refused, before anything touches it."""
        ...


class Unversioned:
    """The schema methods of a journal or store whose storage has no schema: it is always
    current, and migrating it does nothing."""

    async def schema_version(self) -> int | None:
        return None

    async def check(self) -> str | None:
        return None

    async def migrate(self) -> list[str]:
        return []


@dataclass(frozen=True)
class Schema:
    """One component's schema: its steps, oldest first, and how it names itself.

    ``component`` words messages (``journal``, ``revisioned store``); ``error`` is what the
    component raises for a schema it cannot use; ``package`` and ``folder`` say where step
    files are (no folder: the steps have no content, as on Redis).
    """

    component: str
    steps: tuple[str, ...]
    error: type[Exception]
    package: str = ""
    folder: str | None = None

    @property
    def version(self) -> int:
        """The version this release reads and writes: how many steps there are."""
        return len(self.steps)

    @property
    def noun(self) -> str:
        """``journal schema``, ``revisioned-store schema``: the schema, named in messages."""
        return f"{self.component.replace(' ', '-')} schema"

    def state(self, found: int | None) -> SchemaState:
        if found is None:
            return SchemaState.ABSENT
        if found > self.version:
            return SchemaState.NEWER
        return SchemaState.OLDER if found < self.version else SchemaState.CURRENT

    def missing(self, found: int | None) -> tuple[str, ...]:
        """The steps a schema at ``found`` lacks."""
        return self.steps[found or 0 :]

    def applied(self, number: int) -> str:
        """How ``migrate`` reports step ``number`` (1-based) once applied."""
        return f"{self.component} schema {number}"

    def problem(self, where: str, found: int | None) -> str | None:
        """A sentence saying why a schema at ``found`` cannot be used, or None when current."""
        state = self.state(found)
        if state is SchemaState.ABSENT:
            return f"{where} has no {self.noun}; {MIGRATE_HINT}"
        if state is SchemaState.NEWER:
            return (
                f"{where} has {self.noun} version {found}, newer than this release's "
                f"{self.version}; {UPGRADE_HINT}"
            )
        if state is SchemaState.OLDER:
            return (
                f"{where} has {self.noun} version {found}, older than this release's "
                f"{self.version} (missing {', '.join(self.missing(found))}); {MIGRATE_HINT}"
            )
        return None

    def refuse(self, where: str, found: int | None) -> None:
        """Raise ``error`` when a schema at ``found`` cannot be used as it is."""
        problem = self.problem(where, found)
        if problem is not None:
            raise self.error(problem)

    def unreadable(self, where: str, what: object) -> Exception:
        """The error for a version that is not a version at all."""
        return self.error(f"{where} holds {what!r:.60}, not a readable {self.noun} version")

    def sql(self, step: str) -> str:
        """The SQL of ``step``, from the file shipped with the package."""
        return "" if self.folder is None else _read_step(self.package, self.folder, step)

    def statements(self, step: str) -> list[str]:
        """``step``'s SQL cut into single statements (SQLite runs one at a time)."""
        found: list[str] = []
        pending = ""
        for line in self.sql(step).splitlines(keepends=True):
            if not pending and (not line.strip() or line.lstrip().startswith("--")):
                continue
            pending += line
            # A trigger's body holds semicolons of its own: cut only where SQLite would.
            if sqlite3.complete_statement(pending):
                found.append(pending.strip())
                pending = ""
        if pending.strip():
            found.append(pending.strip())
        return found


@cache
def _read_step(package: str, folder: str, step: str) -> str:
    try:
        return resources.files(package).joinpath(folder, f"{step}.sql").read_text("utf-8")
    except OSError as exc:
        raise ConfigurationError(
            f"this installation of agents-reconcile lacks its migration step {folder}/"
            f"{step}.sql; reinstall it"
        ) from exc
