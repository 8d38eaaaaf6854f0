"""The fleet self-test, small: worker processes on simulated hosts append to shared sessions
through one journal while workers are killed, paused past their lease and (on servers) their
replies lost; the judge must find nothing stored twice, nothing lost, no intent settled twice,
no write under a lost claim and no continuation on doubt.

Then, once per journal, the settlement throughput phase: every worker settles the same failed
intents at once; each must be settled once and its batch stored once.

This is what ``agents-reconcile selftest --fleet`` prints as tables, on fewer workers, rounds
and sessions.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agents_reconcile._backends.registry import backend_named
from agents_reconcile._selftest.fleet import FleetOptions, FleetResults, fleet_results
from agents_reconcile._selftest.fleet_cluster import cluster_pair, cluster_waits, with_replica_wait

from ..support.servers import POSTGRES_ENV, REDIS_ENV, own_cluster

REDIS_CLUSTER_ENV = backend_named("redis-cluster").environment("TEST")

pytestmark = pytest.mark.faults


def small_fleet(cells: list[tuple[str, str]], **options: Any) -> tuple[FleetResults, str]:
    """The fleet self-test on four workers, two sessions and four rounds in each of ``cells``
    (``options``: its servers, seed and settlement phase), its cells checked clean: each run in
    full, with appends that went through and nothing found broken. Its results and what it
    printed."""
    out = io.StringIO()
    results = fleet_results(
        FleetOptions(workers=4, sessions=2, rounds=4, cells=cells, **options), out
    )
    printed = out.getvalue()
    assert [(r.journal, r.store) for r in results.cells] == cells, printed
    for result in results.cells:
        assert result.rounds == 4, printed
        assert result.ok > 0, printed
        assert result.clean, printed
    return results, printed


def test_small_fleet_keeps_every_promise() -> None:
    """Four workers on two sessions, a few faults per cell: every count is 0 in every cell;
    then 24 failed intents settled by the four at once, on each journal: each exactly once."""
    cells = [("sqlite", "sqlite"), ("sqlite", "revisioned_sqlite")]
    if os.environ.get(REDIS_ENV):
        cells.append(("redis", "revisioned_redis"))
    if os.environ.get(POSTGRES_ENV):
        cells.append(("postgres", "revisioned_postgres"))
    results, printed = small_fleet(
        cells,
        redis_url=os.environ.get(REDIS_ENV),
        postgres_url=os.environ.get(POSTGRES_ENV),
        seed=15,
        settle_sessions=24,
    )
    journals = list(dict.fromkeys(journal for journal, _ in cells))
    assert [phase.journal for phase in results.settlement] == journals, printed
    for phase in results.settlement:
        assert phase.prepared == phase.settlements == 24, printed
        assert phase.settled_twice == phase.stored_twice == 0, printed
        assert phase.lost == phase.unsettled == 0, printed
        assert phase.seconds > 0, printed
    assert "Settlements per second on a shared sqlite journal with 4 workers" in printed


@pytest.mark.skipif(not os.environ.get(REDIS_CLUSTER_ENV), reason=f"{REDIS_CLUSTER_ENV} is unset")
def test_small_fleet_on_a_redis_cluster_through_failovers() -> None:
    """The journal and the revisioned store on a Redis Cluster that is not the self-test's
    (one of this test's own, not the suites' cluster, which other tests use meanwhile): its
    only cluster fault is a graceful ``CLUSTER FAILOVER``, which loses no acknowledged write,
    so every count is 0."""
    with own_cluster() as url:
        results, printed = small_fleet(
            [("redis_cluster", "revisioned_redis_cluster")],
            redis_cluster_url=url,
            seed=4,
            settle_sessions=0,
        )
    (result,) = results.cells
    assert result.faults["failover"] >= 1, printed
    assert "kill_primary" not in result.faults, printed


def test_cluster_cells_pair_and_wait_as_designed() -> None:
    """A cluster pairs with itself and the SQLite stores; the replica wait doubles only the
    cells on a cluster and is asked in the address's query."""
    assert cluster_waits(0) == (0,) and cluster_waits(1) == (0, 1)
    assert cluster_pair("redis_cluster", "revisioned_redis_cluster", 1, None)
    assert cluster_pair("redis_cluster", "sqlite", 0, None)
    assert not cluster_pair("redis_cluster", "revisioned_postgres", 0, None)
    assert not cluster_pair("redis", "revisioned_redis_cluster", 0, None)
    assert cluster_pair("redis", "revisioned_redis_cluster", 0, [("redis", "x")])
    assert cluster_pair("sqlite", "sqlite", 0, None)
    assert not cluster_pair("sqlite", "sqlite", 1, None)
    url = "redis+cluster://127.0.0.1:7101,127.0.0.1:7102"
    assert with_replica_wait(url, 1, 0.5) == f"{url}?replicas=1&replica_timeout=0.5"
    assert with_replica_wait(f"{url}?a=b", 2, 1) == f"{url}?a=b&replicas=2&replica_timeout=1"
    assert with_replica_wait("redis://h:1/0", 1, 1, "redis") == "redis://h:1/0"


def test_an_append_failing_with_an_error_not_of_this_package_is_reported_with_where_it_was_raised(
    tmp_path: Path,
) -> None:
    """A worker's append that failed with a foreign error (a driver's, a bug's) is counted by
    its type, and the cell's table says where the first of that type was raised."""
    from agents_reconcile._selftest.fleet_report import CellResult, judge_cell, render_cell
    from agents_reconcile._selftest.fleet_worker import _failure

    try:
        [][0]
    except IndexError as exc:
        failure = _failure(exc)
    log = tmp_path / "w1.log"
    events = [
        {"event": "start", "item": "w1-s1-0", "session": "s1", "t": 1.0},
        {"event": "end", "item": "w1-s1-0", "session": "s1", "t": 2.0, **failure},
    ]
    log.write_text("".join(json.dumps(event) + "\n" for event in events), encoding="utf-8")
    result = CellResult("sqlite", "sqlite", workers=1, sessions=1)
    judge_cell(result, tmp_path, {"s1": []}, [], [], (0.0, 3.0))
    table = render_cell(result)
    assert result.failed == {"IndexError": 1}
    assert "IndexError raised at test_fleet.py:" in table
    assert "list index out of range" in table


def test_an_item_stored_twice_is_reported_with_the_fault_nearest_its_append(
    tmp_path: Path,
) -> None:
    """A cell that broke a promise names, for each example, the injected fault nearest the append
    it is about, and its table lists the cell's faults in the order they were injected."""
    from agents_reconcile._selftest.fleet_report import CellResult, Fault, judge_cell, render_cell

    log = tmp_path / "w1.log"
    events = [
        {"event": "start", "item": "w1-s1-0", "session": "s1", "t": 10.0},
        {"event": "end", "item": "w1-s1-0", "session": "s1", "t": 12.0, "outcome": "ok"},
        {"event": "start", "item": "w1-s1-1", "session": "s1", "t": 30.0},
        {"event": "end", "item": "w1-s1-1", "session": "s1", "t": 30.5, "outcome": "ok"},
    ]
    log.write_text("".join(json.dumps(event) + "\n" for event in events), encoding="utf-8")
    result = CellResult("redis_cluster", "revisioned_redis_cluster", workers=1, sessions=1)
    result.timeline += [
        Fault("kill", "w2", 1.0, 1.1),
        Fault("kill_primary", "the primary on port 7102", 11.0, 14.0),
        Fault("failover", "the primary on port 7101", 20.0, 21.0),
    ]
    stored = [{"content": "w1-s1-0"}, {"content": "w1-s1-0"}, {"content": "w1-s1-1"}]
    judge_cell(result, tmp_path, {"s1": stored}, [], [], (0.0, 40.0))
    assert result.counts["stored_twice"] == 1
    assert result.examples == [
        "w1-s1-0 stored 2 times in s1 (appended by w1, during kill_primary of the primary on "
        "port 7102)"
    ]
    assert (
        result.nearest_fault(30.0, 30.5)
        == "9.00 s after failover of the primary on port 7101 ended"
    )
    assert result.nearest_fault(0.0, 0.5) == "0.50 s before kill of w2"
    table = render_cell(result)
    listed = table.split("faults in order (seconds from the first):\n")[1].splitlines()
    assert [line.split()[1] for line in listed] == ["kill", "kill_primary", "failover"]
    assert listed[1].split()[0] == "10.00-13.00"
    clean = CellResult("sqlite", "sqlite", workers=1, sessions=1)
    clean.timeline.append(Fault("kill", "w2", 1.0, 1.1))
    assert "faults in order" not in render_cell(clean)
