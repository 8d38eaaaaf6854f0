"""Schema management for journals and revisioned stores: ``agents-reconcile migrate``.

Every SQL journal and store keeps a schema version (the Redis ones a version key). A target
is named by its address:

- a journal: an SQLite path or ``sqlite:///...`` URL, ``redis://...``, ``postgresql://...``;
- a revisioned store: the same forms (an SQLite path is the store's database file).

``migrate`` applies what is missing; ``check`` runs no DDL and writes nothing, and reports
what is missing or newer. Addresses are shown without credentials.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from .errors import ConfigurationError

__all__ = ["Target", "open_target", "safe_address"]


class Migratable(Protocol):
    async def migrate(self) -> list[str]: ...

    async def check(self) -> str | None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Target:
    kind: str
    """``journal`` or ``store``."""
    address: str
    namespace: str | None = None

    def __str__(self) -> str:
        where = f" ({self.namespace})" if self.namespace else ""
        return f"{self.kind} {safe_address(self.address)}{where}"


def safe_address(address: str) -> str:
    """``address`` without a password."""
    if "://" not in address:
        return address
    parts = urlsplit(address)
    if parts.password is None and parts.username is None:
        return address
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}{host}"))


def _scheme(address: str) -> str:
    return urlsplit(address).scheme.lower() if "://" in address else "sqlite"


def open_target(target: Target) -> Migratable:
    """The journal or store object a target names (opened lazily; nothing touched yet)."""
    scheme = _scheme(target.address)
    options: dict[str, Any] = {}
    if target.kind == "journal":
        if scheme == "sqlite":
            from .journal import SQLiteJournal, journal_path

            path = journal_path(target.address)
            assert path is not None
            return SQLiteJournal(path)
        if scheme in ("redis", "rediss", "unix"):
            from .journal.redis import RedisJournal

            if target.namespace:
                options["prefix"] = target.namespace
            return RedisJournal.from_url(target.address, **options)
        if scheme in ("postgresql", "postgres"):
            from .journal.postgres import PostgresJournal

            if target.namespace:
                options["schema"] = target.namespace
            return PostgresJournal.from_url(target.address, **options)
    elif target.kind == "store":
        if scheme == "sqlite":
            from .journal import journal_path
            from .stores import RevisionedSQLiteSession

            path = journal_path(target.address)
            assert path is not None
            return RevisionedSQLiteSession("", Path(path), migrate=False)
        if scheme in ("redis", "rediss", "unix"):
            from .stores.redis import RevisionedRedisSession

            if target.namespace:
                options["prefix"] = target.namespace
            return RevisionedRedisSession.from_url("", target.address, migrate=False, **options)
        if scheme in ("postgresql", "postgres"):
            from .stores.postgres import RevisionedPostgresSession

            if target.namespace:
                options["schema"] = target.namespace
            return RevisionedPostgresSession.from_url("", target.address, migrate=False, **options)
    raise ConfigurationError(f"cannot migrate {target.kind} at {safe_address(target.address)}")


async def run(targets: list[Target], *, check: bool) -> list[tuple[Target, bool, str]]:
    """Migrate (or check) each target: (target, current afterwards, what was done or found)."""
    results = []
    for target in targets:
        handle = open_target(target)
        try:
            if check:
                problem = await handle.check()
                results.append((target, problem is None, problem or "current"))
            else:
                steps = await handle.migrate()
                results.append(
                    (target, True, "applied: " + ", ".join(steps) if steps else "already current")
                )
        finally:
            await handle.close()
    return results
