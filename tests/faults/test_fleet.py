"""The fleet self-test, small: worker processes on simulated hosts append to shared sessions
through one journal while workers are killed, paused past their lease and (on servers) their
replies lost; the judge must find nothing stored twice, nothing lost, no intent settled twice,
no write under a lost claim and no continuation on doubt.

This is what ``agents-reconcile selftest --fleet`` prints as tables, on fewer workers and
rounds.
"""

from __future__ import annotations

import io
import os

import pytest

from agents_reconcile.selftest.fleet import FleetOptions, fleet_results

from ..servers import POSTGRES_ENV, REDIS_ENV

pytestmark = pytest.mark.faults


def test_small_fleet_keeps_every_promise() -> None:
    """Four workers on two sessions, a few faults per cell: every count is 0 in every cell."""
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
        ),
        out,
    )
    assert [(r.journal, r.store) for r in results] == cells, out.getvalue()
    for result in results:
        assert result.rounds == 4, out.getvalue()
        assert result.ok > 0, out.getvalue()
        assert result.clean, out.getvalue()
