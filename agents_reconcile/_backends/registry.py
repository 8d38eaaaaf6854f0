"""Every backend, registered by the schemes of its addresses: the one list that the journal
address of ``ReconcileConfig``, ``agents-reconcile migrate``, the CLI, the self-test and the
test fixtures read.

A backend is one line here: its name, its schemes, where its journal and its revisioned store
are (imported only when used, so a missing optional driver costs nothing until then), the
driver modules it needs, and whether it lives on a server. Each journal class offers
``from_address(address, *, namespace=None)``; each store class ``from_address(session_id,
address, *, namespace=None, migrate=True)``; ``namespace`` is the Redis key prefix or the
PostgreSQL schema (ignored where the address says it all).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from ..errors import ConfigurationError
from . import addresses
from .redaction import Redacted

if TYPE_CHECKING:
    from .journal import IntentJournal

__all__ = ["BACKENDS", "Backend", "backend_for", "backend_named", "backends_storing", "scheme_of"]


@dataclass(frozen=True)
class Backend:
    """One kind of backend, and how to reach its journal and its store."""

    name: str
    schemes: tuple[str, ...]
    journal: str | None = None
    """``module:Class`` of its intent journal."""
    store: str | None = None
    """``module:Class`` of its revisioned store."""
    drivers: tuple[str, ...] = ()
    """Modules its driver needs (an optional extra)."""
    server: bool = False
    """Lives on a server: its address comes from the environment (``environment``)."""
    embedded: str | None = None
    """For a backend without a server: the address of a new one named ``{name}`` in
    ``{directory}``."""
    durable: bool = True
    """Its data outlives the process (the self-test kills processes and reads it back)."""

    def available(self) -> bool:
        """Whether its drivers are installed."""
        return all(importlib.util.find_spec(module) is not None for module in self.drivers)

    def environment(self, role: str) -> str:
        """The variable holding this backend's server URL for ``role`` (``TEST``,
        ``SELFTEST``): ``AGENTS_RECONCILE_<ROLE>_<NAME>_URL`` (a ``-`` of the name as ``_``)."""
        name = self.name.upper().replace("-", "_")
        return f"AGENTS_RECONCILE_{role.upper()}_{name}_URL"

    def address_in(self, directory: Path, name: str) -> str:
        """The address of a new embedded instance called ``name`` under ``directory``."""
        if self.embedded is None:
            raise ConfigurationError(f"the {self.name} backend lives on a server")
        return self.embedded.format(directory=directory, name=name)

    def journal_class(self) -> type[Any]:
        return _load(self.journal, f"the {self.name} backend has no intent journal")

    def store_class(self) -> type[Any]:
        return _load(self.store, f"the {self.name} backend has no revisioned store")

    def stores_kind(self, kind: str) -> bool:
        """Whether an intent whose identity records ``kind`` was written to this backend's
        revisioned store: the kind is what ``derive_identity`` records for the store's class
        (its public name, ``agents_reconcile.RevisionedRedisSession``), never the module path
        it is registered under. The class is loaded (its driver imported) only when its name
        is the one ``kind`` ends with."""
        if self.store is None or kind.rsplit(".", 1)[-1] != self.store.rpartition(":")[2]:
            return False
        from .._core.identity import kind_of

        return kind_of(self.store_class()) == kind

    def open_journal(self, address: str, *, namespace: str | None = None) -> IntentJournal:
        """Its journal at ``address`` (nothing is connected yet); an address it cannot mean
        is refused first."""
        check_address(address, what="journal")
        journal: IntentJournal = self.journal_class().from_address(address, namespace=namespace)
        return journal

    def open_store(
        self,
        session_id: str,
        address: str,
        *,
        namespace: str | None = None,
        migrate: bool = True,
    ) -> Any:
        """Its revisioned store for ``session_id`` at ``address`` (nothing connected yet);
        an address it cannot mean is refused first."""
        check_address(address, what="store")
        return self.store_class().from_address(
            session_id, address, namespace=namespace, migrate=migrate
        )


BACKENDS: Final = (
    Backend(
        "memory",
        ("memory",),
        journal="agents_reconcile._backends.memory.journal:MemoryJournal",
        store="agents_reconcile._backends.memory.store:MemoryRevisionedSession",
        embedded="memory://{name}",
        durable=False,
    ),
    Backend(
        "sqlite",
        ("sqlite",),
        journal="agents_reconcile._backends.sqlite.journal:SQLiteJournal",
        store="agents_reconcile._backends.sqlite.store:RevisionedSQLiteSession",
        embedded="{directory}/{name}.db",
    ),
    Backend(
        "redis",
        ("redis", "rediss", "unix"),
        journal="agents_reconcile._backends.redis.journal:RedisJournal",
        store="agents_reconcile._backends.redis.store:RevisionedRedisSession",
        drivers=("redis",),
        server=True,
    ),
    Backend(
        "redis-cluster",
        ("redis+cluster", "rediss+cluster"),
        journal="agents_reconcile._backends.redis.journal:RedisClusterJournal",
        store="agents_reconcile._backends.redis.store:RevisionedRedisSession",
        drivers=("redis",),
        server=True,
    ),
    Backend(
        "postgres",
        ("postgresql", "postgres"),
        journal="agents_reconcile._backends.postgres.journal:PostgresJournal",
        store="agents_reconcile._backends.postgres.store:RevisionedPostgresSession",
        drivers=("asyncpg",),
        server=True,
    ),
)
"""Every backend; the first whose schemes hold an address's scheme serves it. A plain path
(no ``://``) is an SQLite file."""

_BY_SCHEME: Final = {scheme: backend for backend in BACKENDS for scheme in backend.schemes}


def scheme_of(address: str) -> str:
    """The scheme an address names (``sqlite`` for a plain path)."""
    if "://" not in address:
        return "sqlite"
    try:
        return urlsplit(address).scheme.lower()
    except ValueError:  # a bracket left open in the host: the scheme is still what it says
        return address.split("://", 1)[0].lower()


def backend_for(address: str, *, what: str = "backend") -> Backend:
    """The backend serving ``address``; ``what`` (``journal``, ``store``) words the error."""
    scheme = scheme_of(address)
    found = _BY_SCHEME.get(scheme)
    if found is None:
        # The address itself may hold credentials: name only its scheme.
        known = ", ".join(f"{name}://" for name in _BY_SCHEME)
        raise ConfigurationError(
            f"unknown {what} URL scheme {scheme!r}: use a file path or one of {known}"
        )
    return found


def backends_storing(kind: str) -> tuple[Backend, ...]:
    """Every backend whose revisioned store records ``kind`` (``Backend.stores_kind``): one
    store class can serve several backends (a Redis server and a Redis Cluster), so which of
    them an intent was written to is said by its store's address, never by the first match."""
    return tuple(backend for backend in BACKENDS if backend.stores_kind(kind))


def backend_named(name: str) -> Backend:
    for backend in BACKENDS:
        if backend.name == name:
            return backend
    known = ", ".join(backend.name for backend in BACKENDS)
    raise ConfigurationError(f"unknown backend {name!r}; known: {known}")


def _load(target: str | None, missing: str) -> type[Any]:
    if target is None:
        raise ConfigurationError(missing)
    module, _, name = target.partition(":")
    found: type[Any] = getattr(importlib.import_module(module), name)
    return found


# -- addresses ---------------------------------------------------------------------------------

addresses.KNOWN_SCHEMES.update(scheme for backend in BACKENDS for scheme in backend.schemes)


def parse_address(address: str, *, what: str = "journal") -> Backend:
    """The backend serving ``address``, once every part of the address is checked; otherwise a
    ``ConfigurationError`` saying which part is wrong, without the address itself (the caller
    names it, as ``printable`` shows it). ``what`` (``journal``, ``store``) words the error."""
    if not isinstance(address, str):
        raise ConfigurationError(f"a {what} address is a string, not {type(address).__name__}")
    if not address.strip():
        state = "empty" if not address else "blank"
        raise ConfigurationError(
            f"the address is {state}: give a file path, {addresses.SQLITE_FORMS}, or a server URL"
        )
    backend = backend_for(address, what=what)
    addresses.CHECKS.get(backend.name, addresses.anything)(address)
    return backend


def check_address(address: str, *, what: str = "journal") -> Backend:
    """``parse_address``, with a refusal that names the address (without its password)."""
    try:
        return parse_address(address, what=what)
    except ConfigurationError as exc:
        problem = Redacted.of(address).scrub(str(exc))
        raise ConfigurationError(
            f"{what} address {addresses.printable(address)!r}: {problem}"
        ) from None
