"""Schema management for journals and revisioned stores: ``agents-reconcile migrate``.

Every journal and store keeps a schema version (SQL tables, or a Redis version key). A target
is named by its address, and the backend registry says which backend serves it:

- a journal: an SQLite path or ``sqlite:///...`` URL, ``redis://...``, ``postgresql://...``;
- a revisioned store: the same forms (an SQLite path is the store's database file).

``migrate`` applies what is missing; ``check`` runs no DDL and writes nothing, and reports
what is missing or newer. Addresses are shown without credentials.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .backends.redaction import redacted
from .backends.registry import backend_for
from .backends.schema import Versioned
from .errors import ConfigurationError

__all__ = ["Target", "open_target", "safe_address"]


class Migratable(Versioned, Protocol):
    """A journal or store opened for ``migrate``: its schema methods, and ``close``."""

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
    return redacted(address)


def open_target(target: Target) -> Migratable:
    """The journal or store object a target names (opened lazily; nothing touched yet)."""
    if target.kind not in ("journal", "store"):
        raise ConfigurationError(f"cannot migrate {target.kind} at {safe_address(target.address)}")
    backend = backend_for(target.address, what=target.kind)
    if target.kind == "journal":
        journal: Migratable = backend.open_journal(target.address, namespace=target.namespace)
        return journal
    store: Migratable = backend.open_store(
        "", target.address, namespace=target.namespace, migrate=False
    )
    return store


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
