"""The replica wait: a Redis journal or store write that returns only once enough replicas
hold it.

Redis replicates asynchronously. A primary acknowledges a script as soon as it ran, and a
failover in the next instant can promote a replica that never received it: the write is
gone although its caller was told it happened. An address may ask for the wait in its query,
``?replicas=N&replica_timeout=S`` (seconds, 1 by default): after each writing script the
same connection sends ``WAIT N S*1000``, which returns once N replicas acknowledged every
write that connection made, or when the time is up.

A wait that ends with fewer acknowledgements raises ``ReplicasBehind``: the write ran on the
primary, and whether it survives a failover is unknown. The journal reports it as
``JournalUnavailable``; the store lets it reach its caller, as any failed write, so the
wrapper settles the write from the store's record before going on. Nothing is ever sent
twice: ``WAIT`` counts the writes of its own connection, so the script and its wait go on one
connection, outside the client's retries (a retry on another connection would wait for
nothing). ``WAIT`` narrows the window; it does not make Redis a consensus store (a replica
that acknowledged can still lose the write when it is restarted without persistence).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from ...errors import ConfigurationError
from ..addresses import (
    REPLICA_WAIT,
    REPLICAS_MOST,
    WAIT_LONGEST,
    WAIT_SHORTEST,
    replica_wait,
    single_query,
)

try:
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ConfigurationError(
        "the Redis backends need redis-py: pip install 'agents-reconcile[redis]'"
    ) from exc

__all__ = ["OPTIONS", "ReplicaWait", "ReplicasBehind", "split", "waited"]

OPTIONS: Final = REPLICA_WAIT
"""The query settings that ask for the wait; they are this package's, never the driver's."""


class ReplicasBehind(RedisTimeoutError):
    """Fewer replicas than asked acknowledged a write in time: it ran on the primary, and a
    failover may still lose it."""


@dataclass(frozen=True, slots=True)
class ReplicaWait:
    """Wait after each write for ``replicas`` replicas (1 to 100), at most ``timeout`` seconds
    (0.001 to 3600): what ``?replicas=N&replica_timeout=S`` asks for in an address given to
    ``from_url``, for a ``RedisJournal`` or ``RevisionedRedisSession`` built around a client
    of one's own (``replica_wait=ReplicaWait(1, 0.5)``). Out of bounds: ``ConfigurationError``."""

    replicas: int
    timeout: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, int):
            raise ConfigurationError(f"replicas={self.replicas!r} is not a whole number")
        if not 1 <= self.replicas <= REPLICAS_MOST:
            raise ConfigurationError(
                f"replicas={self.replicas} is not from 1 to {REPLICAS_MOST} (for no wait, give "
                "replica_wait=None)"
            )
        timeout = self.timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise ConfigurationError(f"timeout={timeout!r} is not a number of seconds")
        if not WAIT_SHORTEST <= timeout <= WAIT_LONGEST:
            raise ConfigurationError(
                f"timeout={timeout!r} is not a number of seconds from {WAIT_SHORTEST:g} to "
                f"{WAIT_LONGEST:g} (a wait without a limit could hold a write forever)"
            )

    @property
    def command(self) -> tuple[str, int, int]:
        return ("WAIT", self.replicas, max(1, round(self.timeout * 1000)))

    def check(self, acknowledged: object) -> None:
        """Raise ``ReplicasBehind`` unless ``acknowledged`` (WAIT's reply) is enough."""
        count = acknowledged if isinstance(acknowledged, int) else -1
        if count < self.replicas:
            raise ReplicasBehind(
                f"the write ran on the primary, but {max(count, 0)} of the {self.replicas} "
                f"replicas asked for acknowledged it within {self.timeout:g} s: a failover "
                "could still lose it"
            )


async def waited(connection: Any, wait: ReplicaWait) -> None:
    """``WAIT`` on ``connection``, which just ran a write; ``ReplicasBehind`` when too few
    replicas acknowledged it. An error on the way leaves the connection closed."""
    try:
        await connection.send_command(*wait.command)
        acknowledged = await connection.read_response()
    except BaseException:
        await connection.disconnect(nowait=True)
        raise
    wait.check(acknowledged)


def split(url: str) -> tuple[str, ReplicaWait | None]:
    """``url`` without the wait's settings (what the driver is given, and what names the
    server), and the wait they ask for. A ``ConfigurationError`` names a setting it cannot
    read; the URL itself is checked elsewhere."""
    if "?" not in url:
        return url, None
    parts = urlsplit(url)
    query = single_query(parts.query, keep_blank_values=True)  # a setting given twice: refused
    asked = {name: values[0] for name, values in query.items() if name in OPTIONS}
    if not asked:
        return url, None
    found = replica_wait(asked)
    wait = None if found is None else ReplicaWait(*found)
    kept = "&".join(part for part in parts.query.split("&") if part.split("=", 1)[0] not in OPTIONS)
    return urlunsplit(parts._replace(query=kept)), wait
