"""What the replica wait costs an append, on a Redis Cluster with one replica per primary.

Four variants, interleaved round by round in one run, each a 3-item ``add_items``:
- ``store``: ``RevisionedRedisSession`` on the cluster, bare;
- ``store, wait``: the same with ``?replicas=1`` (each write followed by ``WAIT 1``);
- ``wrapped``: that store inside ``ReconcilingSession``, its journal on the same cluster;
- ``wrapped, wait``: the store and the journal both with ``?replicas=1``.

Each waiting variant is compared with its own variant without the wait: the ratio is the
price of knowing that a failover cannot lose an acknowledged write (replication on loopback
is fast; across hosts it adds a network round trip to the nearest replica).

The cluster comes from ``AGENTS_RECONCILE_TEST_REDIS_CLUSTER_URL`` (``scripts/services.sh
start`` starts one); without it the script says so and exits.

Usage::

    python benchmarks/replica_wait.py            # full run (under a minute)
    python benchmarks/replica_wait.py --quick    # smoke run
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    AppendVariant,
    microseconds,
    percentile,
    print_machine,
    print_table,
    rounds_settings,
    time_appends,
)

from agents_reconcile import ReconcileConfig, ReconcilingSession


@dataclass(frozen=True)
class Settings:
    rounds: int
    warmup: int


FULL = Settings(rounds=600, warmup=60)
QUICK = Settings(rounds=40, warmup=5)
WAIT = "replicas=1&replica_timeout=2"


def _with(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


async def measure(url: str, workdir: Path, settings: Settings) -> list[AppendVariant]:
    from agents_reconcile._backends.redis.journal import RedisClusterJournal
    from agents_reconcile._backends.redis.store import RevisionedRedisSession

    prefix = f"bench-wait-{uuid.uuid4().hex[:8]}"
    opened: list[Any] = []

    def store(name: str, address: str) -> Any:
        found = RevisionedRedisSession.from_url(name, address, prefix=prefix)
        opened.append(found)
        return found

    def wrapped(name: str, address: str) -> ReconcilingSession:
        journal = RedisClusterJournal.from_url(address, prefix=f"{prefix}-journal")
        opened.append(journal)
        config = ReconcileConfig(journal=journal, retention=None)
        return ReconcilingSession(store(name, address), config=config)

    variants = [
        AppendVariant("store", store("bare", url), []),
        AppendVariant("store, wait", store("bare-wait", _with(url, WAIT)), []),
        AppendVariant("wrapped", wrapped("wrapped", url), []),
        AppendVariant("wrapped, wait", wrapped("wrapped-wait", _with(url, WAIT)), []),
    ]
    try:
        await time_appends(variants, settings.rounds, settings.warmup)
    finally:
        for thing in opened:
            await thing.drop()
        for thing in opened:
            await thing.close()
    return variants


def report(variants: list[AppendVariant]) -> None:
    by_name = {variant.name: variant.samples for variant in variants}
    rows = []
    for name, samples in by_name.items():
        base = by_name[name.removesuffix(", wait")]
        p50, p99 = statistics.median(samples), percentile(samples, 99)
        rows.append(
            [
                name,
                f"{microseconds(p50):.0f}",
                f"{microseconds(p99):.0f}",
                f"{p50 / statistics.median(base):.2f}",
                f"{p99 / percentile(base, 99):.2f}",
            ]
        )
    print_table(
        "A 3-item append on the cluster, with and without waiting for one replica",
        ["variant", "p50 us", "p99 us", "p50 / no wait", "p99 / no wait"],
        rows,
    )


def main(argv: list[str] | None = None) -> None:
    settings, mode = rounds_settings(__doc__, argv, FULL, QUICK)
    url = os.environ.get("AGENTS_RECONCILE_TEST_REDIS_CLUSTER_URL")
    if not url:
        print("no cluster: set AGENTS_RECONCILE_TEST_REDIS_CLUSTER_URL (scripts/services.sh start)")
        return
    logging.getLogger("agents_reconcile").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        print_machine("Replica wait benchmark", workdir, mode, [("cluster", url.split("?", 1)[0])])
        variants = asyncio.run(measure(url, workdir, settings))
    report(variants)


if __name__ == "__main__":
    sys.exit(main())
