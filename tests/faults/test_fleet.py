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
import os

import pytest

from agents_reconcile._selftest.fleet import FleetOptions, fleet_results

from ..support.servers import POSTGRES_ENV, REDIS_ENV

pytestmark = pytest.mark.faults


def test_small_fleet_keeps_every_promise() -> None:
    """Four workers on two sessions, a few faults per cell: every count is 0 in every cell;
    then 24 failed intents settled by the four at once, on each journal: each exactly once."""
    cells = [("sqlite", "sqlite"), ("sqlite", "revisioned_sqlite")]
    if os.environ.get(REDIS_ENV):
        cells.append(("redis", "revisioned_redis"))
    if os.environ.get(POSTGRES_ENV):
        cells.append(("postgres", "revisioned_postgres"))
    out = io.StringIO()
    results = fleet_results(
        FleetOptions(
            workers=4,
            sessions=2,
            rounds=4,
            cells=cells,
            redis_url=os.environ.get(REDIS_ENV),
            postgres_url=os.environ.get(POSTGRES_ENV),
            seed=15,
            settle_sessions=24,
        ),
        out,
    )
    assert [(r.journal, r.store) for r in results.cells] == cells, out.getvalue()
    for result in results.cells:
        assert result.rounds == 4, out.getvalue()
        assert result.ok > 0, out.getvalue()
        assert result.clean, out.getvalue()
    journals = list(dict.fromkeys(journal for journal, _ in cells))
    assert [phase.journal for phase in results.settlement] == journals, out.getvalue()
    for phase in results.settlement:
        assert phase.prepared == phase.settlements == 24, out.getvalue()
        assert phase.settled_twice == phase.stored_twice == 0, out.getvalue()
        assert phase.lost == phase.unsettled == 0, out.getvalue()
        assert phase.seconds > 0, out.getvalue()
    assert "Settlements per second on a shared sqlite journal with 4 workers" in out.getvalue()
