"""An address's query settings are each given once: a setting given twice (which the drivers
and this package's own settings read differently, the first or the last) is refused with a
``ConfigurationError`` naming it, for every option a journal or store address takes, by every
way an address comes in. The replica wait's count is bounded (at most ``REPLICAS_MOST``), so a
count the server cannot read is refused when the address is read, not reported later as a
damaged journal."""

from __future__ import annotations

from typing import Any

import pytest

from agents_reconcile._backends.addresses import CLUSTER_OPTIONS, REPLICAS_MOST, replica_wait
from agents_reconcile._backends.redis.replicas import split
from agents_reconcile._backends.registry import backend_for, check_address
from agents_reconcile._session.config import ReconcileConfig
from agents_reconcile.errors import ConfigurationError

REDIS = "redis://127.0.0.1:6390/0"
CLUSTER = "redis+cluster://127.0.0.1:7000,127.0.0.1:7001"
POSTGRES = "postgresql://app@127.0.0.1:5440/chat"

_VALUES: dict[str, tuple[str, str]] = {
    "socket_keepalive": ("true", "false"),
    "require_full_coverage": ("true", "false"),
    "dynamic_startup_nodes": ("true", "false"),
    "max_connections": ("10", "20"),
    "protocol": ("2", "3"),
    "reinitialize_steps": ("5", "10"),
    "client_name": ("worker-one", "worker-two"),
    "username": ("user-one", "user-two"),
    "password": ("secret-one-q7", "secret-two-q7"),
}
"""Two values each option reads, for those not numbers of seconds."""

REPEATED = [
    pytest.param(REDIS, "replicas", "1", "2", id="redis-replicas"),
    pytest.param(REDIS, "replicas", "1", "0", id="redis-replicas-then-none"),
    pytest.param(f"{REDIS}?replicas=1", "replica_timeout", "1", "2", id="redis-replica_timeout"),
    pytest.param("redis://127.0.0.1:6390", "db", "1", "2", id="redis-db"),
    pytest.param(REDIS, "socket_timeout", "1", "2", id="redis-socket_timeout"),
    pytest.param(REDIS, "max_connections", "10", "20", id="redis-max_connections"),
    pytest.param("unix:///tmp/redis.sock", "db", "1", "1", id="unix-db-same-value"),
    pytest.param(CLUSTER, "replicas", "1", "0", id="cluster-replicas"),
    pytest.param(
        f"{CLUSTER}?replicas=1", "replica_timeout", "1", "2", id="cluster-replica_timeout"
    ),
    pytest.param(CLUSTER, "db", "0", "0", id="cluster-db"),
    *(
        pytest.param(CLUSTER, name, *_VALUES.get(name, ("1", "2")), id=f"cluster-{name}")
        for name in CLUSTER_OPTIONS
    ),
    pytest.param(POSTGRES, "sslmode", "disable", "require", id="postgres-sslmode"),
    pytest.param(POSTGRES, "port", "5440", "5441", id="postgres-port"),
    pytest.param(POSTGRES, "application_name", "a", "b", id="postgres-application_name"),
    pytest.param(
        "postgresql://app@127.0.0.1:5440/", "dbname", "chat", "other", id="postgres-dbname"
    ),
    pytest.param("postgresql:///chat", "host", "127.0.0.1", "::1", id="postgres-host"),
]


def with_query(address: str, *pairs: tuple[str, str]) -> str:
    query = "&".join(f"{name}={value}" for name, value in pairs)
    return f"{address}{'&' if '?' in address else '?'}{query}"


@pytest.mark.parametrize(("address", "name", "first", "second"), REPEATED)
def test_a_setting_given_twice_is_refused_naming_it(
    address: str, name: str, first: str, second: str
) -> None:
    """Given once, the setting is taken; given twice (even with the same value), the address
    is refused by the registry and by a config, saying which setting and why."""
    check_address(with_query(address, (name, first)))
    twice = with_query(address, (name, first), (name, second))
    for attempt in (lambda: check_address(twice), lambda: ReconcileConfig(journal=twice)):
        with pytest.raises(ConfigurationError, match="given more than once") as refused:
            attempt()
        assert repr(name) in str(refused.value)


@pytest.mark.parametrize("address", [REDIS, CLUSTER], ids=["redis", "redis-cluster"])
@pytest.mark.parametrize("kind", ["journal", "store"])
def test_every_way_in_refuses_a_replica_wait_given_twice(address: str, kind: str) -> None:
    """``from_url`` of the journal and the store, and the wait's own reading, refuse
    ``?replicas=1&replicas=0``, which once waited for nothing (the last value won)."""
    twice = with_query(address, ("replicas", "1"), ("replicas", "0"))
    with pytest.raises(ConfigurationError, match="'replicas' is given more than once"):
        split(twice)
    backend = backend_for(address)
    if not backend.available():
        pytest.skip(f"{backend.name}: no driver")
    opened: Any = backend.journal_class() if kind == "journal" else backend.store_class()
    with pytest.raises(ConfigurationError, match="given more than once"):
        if kind == "journal":
            opened.from_url(twice)
        else:
            opened.from_url("s", twice)


@pytest.mark.parametrize(
    "count",
    [
        str(REPLICAS_MOST + 1),
        "9223372036854775808",  # one past the server's largest integer
        "99999999999999999999",
        "9" * 5000,  # past what Python reads as an int by default
    ],
    ids=["most-plus-one", "past-int64", "twenty-nines", "five-thousand-digits"],
)
@pytest.mark.parametrize("address", [REDIS, CLUSTER], ids=["redis", "redis-cluster"])
def test_a_replica_count_past_the_most_is_refused_when_read(address: str, count: str) -> None:
    """A count beyond ``REPLICAS_MOST`` is a ``ConfigurationError`` saying the bound, from the
    config and from ``from_url``, before anything is connected: never a ``JournalCorrupt``
    when the server cannot read it."""
    asked = with_query(address, ("replicas", count))
    with pytest.raises(ConfigurationError, match=f"at most {REPLICAS_MOST}"):
        ReconcileConfig(journal=asked)
    backend = backend_for(address)
    if backend.available():
        with pytest.raises(ConfigurationError, match=f"at most {REPLICAS_MOST}"):
            backend.journal_class().from_url(asked)


def test_the_most_replicas_is_taken() -> None:
    """``REPLICAS_MOST`` (100) itself, and 0 (no wait), are read as they say."""
    assert REPLICAS_MOST == 100
    assert replica_wait({"replicas": "100"}) == (100, 1.0)
    assert replica_wait({"replicas": "0100", "replica_timeout": "2"}) == (100, 2.0)
    assert replica_wait({"replicas": "0"}) is None
    check_address(with_query(CLUSTER, ("replicas", "100")))
