"""Many wrappers on one session at once, as a web app builds one per request: every run ends,
in a result or a denial, within its bound; nothing is stored twice and nothing is lost."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_reconcile import ContinuationDenied, ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.registry import Backend
from agents_reconcile._backends.sqlite.store import RevisionedSQLiteSession
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import address, namespace, registered

WAIT = 5.0
"""The config's in_flight_wait in these tests: no run may take much longer than a few."""


def agent_for(run: int) -> Agent[Any]:
    """An agent whose model calls a tool, then answers; every item names its run."""

    @function_tool
    def lookup(query: str) -> str:
        """Look something up."""
        return f"found {query}"

    model = ScriptedModel(
        [
            [function_call("lookup", {"query": f"q{run}"}, call_id=f"call-{run}")],
            [assistant_message(f"answer {run}")],
        ]
    )
    return Agent(name="assistant", model=model, tools=[lookup])


def names(items: list[Any]) -> list[str]:
    found = []
    for item in items:
        if item.get("type") == "function_call":
            found.append(f"call:{item['call_id']}")
        elif item.get("type") == "function_call_output":
            found.append(f"output:{item['call_id']}")
        elif item.get("role") == "user":
            found.append(f"user:{item['content']}")
        else:
            found.append(f"assistant:{item['content'][0]['text']}")
    return found


@asynccontextmanager
async def journal_of(
    backend: Backend, directory: Path
) -> AsyncIterator[tuple[dict[str, Any], Any]]:
    """A journal of ``backend`` of the test's own (a namespace on a server, dropped after; a
    new embedded one otherwise), with the fields that name it to a worker process."""
    fields = {
        "backend": backend.name,
        "address": address(backend, directory, "journal"),
        "namespace": namespace() if backend.server else None,
    }
    opened = backend.open_journal(fields["address"], namespace=fields["namespace"])
    try:
        yield fields, opened
    finally:
        if backend.server:
            await opened.drop()
        await opened.close()


@pytest.fixture(params=registered("journal"))
async def journal(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """The journal every wrapper of a test shares, of each registered backend."""
    async with journal_of(request.param, tmp_path) as (_, opened):
        yield opened


async def run_all(
    journal: Any,
    tmp_path: Path,
    runs: int,
    *,
    faults: dict[int, Fault] | None = None,
    **config: Any,
) -> tuple[list[Any], float]:
    """``runs`` concurrent ``Runner.run`` calls, one wrapper each, on one file and session id."""
    settings = ReconcileConfig(journal=journal, in_flight_wait=WAIT, **config)

    async def one(run: int) -> Any:
        inner: Any = SQLiteSession("shared", tmp_path / "chat.db")
        if faults and run in faults:
            inner = FaultInjectingSession(inner)
            inner.plan(faults[run])
        session = ReconcilingSession(inner, config=settings)
        return await Runner.run(
            agent_for(run), f"hello {run}", session=session, run_config=session.run_config()
        )

    started = time.monotonic()
    outcomes = await asyncio.wait_for(
        asyncio.gather(*(one(run) for run in range(runs)), return_exceptions=True),
        timeout=runs * WAIT * 3,
    )
    return list(outcomes), time.monotonic() - started


async def settled_history(journal: Any, tmp_path: Path) -> list[str]:
    """The history once a fresh wrapper has settled whatever the runs left pending."""
    session = ReconcilingSession(
        SQLiteSession("shared", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
    )
    await session.reconcile()
    assert await session.pending() == []
    return names(await session.get_items())


def run_items(run: int) -> list[str]:
    return [
        f"user:hello {run}",
        f"call:call-{run}",
        f"output:call-{run}",
        f"assistant:answer {run}",
    ]


@pytest.mark.parametrize("runs", [2, 4, 8])
async def test_concurrent_runs_each_with_its_own_wrapper_all_finish(
    journal: Any, tmp_path: Path, runs: int
) -> None:
    """Concurrent runs with the default configuration all complete (they used to livelock:
    each wrapper's taken-back intent moved the count the others had read), and every run's
    items are stored exactly once."""
    outcomes, elapsed = await run_all(journal, tmp_path, runs)
    failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    assert failures == [], failures
    history = await settled_history(journal, tmp_path)
    assert sorted(history) == sorted(item for run in range(runs) for item in run_items(run))
    assert elapsed < runs * WAIT


@pytest.mark.parametrize("fault", [Fault.REJECT, Fault.LOST_ACK], ids=lambda f: f.value)
async def test_concurrent_runs_with_a_failing_append_end_without_duplicates(
    journal: Any, tmp_path: Path, fault: Fault
) -> None:
    """With one run's append failing, every other run ends within its bound, and once the
    failed intent is settled nothing is stored twice and no acknowledged item is missing."""
    outcomes, elapsed = await run_all(journal, tmp_path, 4, faults={1: fault})
    for run, outcome in enumerate(outcomes):
        if run == 1:
            assert isinstance(outcome, BackendFailure), outcome
        else:
            assert not isinstance(outcome, BaseException) or isinstance(
                outcome, ContinuationDenied
            ), outcome
    history = await settled_history(journal, tmp_path)
    assert len(history) == len(set(history)), history
    for run, outcome in enumerate(outcomes):
        if not isinstance(outcome, BaseException):
            assert set(run_items(run)) <= set(history)
    # The failed run's input was either replayed (rejected) or found (lost acknowledgement).
    assert "user:hello 1" in history
    assert elapsed < 4 * WAIT


REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture(
    params=[
        param
        for param in registered("journal")
        if param.values[0].durable  # type: ignore[union-attr]
    ]
)
async def shared_journal(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[dict[str, Any], Any]]:
    """A journal that processes can share (of each registered backend whose data outlives a
    process); yields the spec fields that name it and the journal itself for checking."""
    async with journal_of(request.param, tmp_path) as found:
        yield found


async def start_processes(spec: dict[str, Any], count: int, directory: Path) -> list[Any]:
    """Start ``count`` worker processes and let them go together once all are ready."""
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.concurrent_worker",
            json.dumps({**spec, "process": number}),
            cwd=REPOSITORY,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for number in range(count)
    ]
    deadline = time.monotonic() + 60
    while not all((directory / f"ready-{number}").exists() for number in range(count)):
        assert time.monotonic() < deadline, "the workers never became ready"
        await asyncio.sleep(0.01)
    (directory / "go").touch()
    return processes


# The journals' own claims and compare-and-sets under contention are their conformance
# suite's (racing openings, transitions, settlements); here each store kind meets the SQLite
# journal, and each server journal one store kind in turn.
@pytest.mark.rotation("shared_journal", ("sqlite",))
@pytest.mark.parametrize("store", ["sqlite_session", "revisioned_sqlite"])
async def test_two_processes_of_eight_wrappers_with_faults(
    shared_journal: Any, store: str, tmp_path: Path
) -> None:
    """Eight wrappers in each of two processes append to one session at once, some appends
    failing (rejected, or written with the acknowledgement lost): every append ends within its
    bound, and once the last failed intent is settled, every item whose append did not end in
    a denial is stored exactly once and nothing else is."""
    fields, journal = shared_journal
    spec = {
        **fields,
        "store": store,
        "directory": str(tmp_path),
        "wrappers": 8,
        "appends": 5,
        "fault_rate": 0.15,
        "in_flight_wait": WAIT,
        "seed": 20261130,
    }
    processes = await start_processes(spec, 2, tmp_path)
    replies = await asyncio.wait_for(
        asyncio.gather(*(process.communicate() for process in processes)), timeout=180
    )
    ended = []
    for process, (out, err) in zip(processes, replies, strict=True):
        assert process.returncode == 0, err.decode()
        ended.extend(json.loads(line) for line in out.decode().splitlines())
    assert len(ended) == 2 * 8 * 5
    slowest = max(entry["seconds"] for entry in ended)
    assert slowest < 2 * WAIT + 2, f"an append took {slowest:.1f} s"

    inner: Any = (
        RevisionedSQLiteSession("shared", tmp_path / "revisioned.db")
        if store == "revisioned_sqlite"
        else SQLiteSession("shared", tmp_path / "chat.db")
    )
    checker = ReconcilingSession(inner, config=ReconcileConfig(journal=journal))
    await checker.reconcile()
    assert await checker.pending() == []
    stored = [item["content"] for item in await inner.get_items()]
    assert len(stored) == len(set(stored)), "an item was stored twice"
    kept = {entry["text"] for entry in ended if entry["outcome"] in ("ok", "fault")}
    assert set(stored) == kept
    faults = sum(entry["outcome"] == "fault" for entry in ended)
    assert faults > 0, "the seed should make some appends fail"
