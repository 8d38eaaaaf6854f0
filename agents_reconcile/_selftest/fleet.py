"""``agents-reconcile selftest --fleet``: many worker processes, each on a simulated host of its
own, appending to a few shared sessions through one journal while a driver injects faults.

For each journal x store cell the driver starts the workers (``fleet_worker``), then for a
bounded number of rounds injects one fault a round, chosen in turn among those the cell allows:

- ``kill``: SIGKILL a random worker, and start a replacement on a new host name;
- ``pause``: SIGSTOP a random worker at a random moment, SIGCONT it after longer than the lease;
- ``pause_in_flight``: make a worker stop itself inside an append (its intent durable, its
  write not started), SIGCONT it after longer than the lease: another worker takes over;
- ``drop_reply``: a proxy in front of Redis or PostgreSQL (``faultproxy.FaultProxy``, on an
  event loop thread of the driver) loses the next reply to a worker that goes through it;
- ``restart``: stop and start the server, only for servers the driver started itself
  (``own_servers``): never one it was given;
- on a Redis Cluster (``fleet_cluster``): ``failover`` (``CLUSTER FAILOVER`` on a replica of a
  primary holding keys of the cell) and, on a cluster the driver started itself,
  ``kill_primary`` (SIGKILL a primary, start it again once its replica took over). With
  ``replicas`` the cluster cells run twice: without and with the replica wait (store name
  suffixed `` wait=N``).

Then every worker is resumed and asked to stop (SIGKILL after a bound), a fresh process on a
fresh host settles what is pending on every session, and the judge (``fleet_report``) reads the
store afresh and the journal's decisions and counts what must never happen.

The few settling decisions of the fault rounds follow the fault rate, not the journal's speed.
So after the cells, once per journal, a settlement throughput phase (no faults) measures it:
one process leaves ``settle_sessions`` sessions of a revisioned SQLite store file each holding
one failed intent (its write rejected before writing); then the workers, on hosts of their own,
are told to go at once and each reconciles every session in an order of its own until none is
pending. The settling decisions in the journal, over the time from the go to the last of them,
give settlements per second; the judge checks that no intent was settled twice and that each
session holds its batch exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, TextIO
from urllib.parse import urlsplit

from .._backends.faultproxy import FaultProxy
from .._core.ownership import process_state
from .fleet_cluster import (
    CLUSTER,
    ClusterFaults,
    OwnCluster,
    cluster_pair,
    cluster_waits,
    with_replica_wait,
)
from .fleet_hosts import ForkServer, OwnServers, ProxyLoop, alive, through
from .fleet_report import (
    CellResult,
    Pause,
    SettleResult,
    judge_cell,
    judge_settlement,
    render_cell,
    render_settlement,
)
from .fleet_totals import print_totals, settlement_title

__all__ = ["JOURNALS", "STORES", "FleetOptions", "FleetResults", "fleet_results", "run_fleet"]

JOURNALS: Final = ("sqlite", "redis", "postgres", CLUSTER)
STORES: Final = (
    "sqlite",
    "revisioned_sqlite",
    "revisioned_redis",
    "revisioned_postgres",
    f"revisioned_{CLUSTER}",
)
_SERVER_OF: Final = {"redis": "redis", "postgres": "postgres", CLUSTER: CLUSTER}
_STATE_POLL: Final = 0.01


@dataclass(frozen=True)
class FleetOptions:
    """What a fleet run does."""

    workers: int = 8
    sessions: int = 3
    rounds: int = 20
    lease: float = 1.0
    in_flight_wait: float = 0.5
    pause: float = 1.6
    """How long a paused worker stays stopped (longer than the lease)."""
    journals: Sequence[str] = JOURNALS
    stores: Sequence[str] = STORES
    redis_url: str | None = None
    postgres_url: str | None = None
    redis_cluster_url: str | None = None
    own_servers: bool = False
    """Start private Redis and PostgreSQL servers and a private Redis Cluster (when their
    binaries are here); restart the servers and kill the cluster's primaries as faults."""
    replicas: int = 0
    """Run the cluster cells again with the replica wait for this many replicas (0: not)."""
    replica_timeout: float = 1.0
    seed: int | None = None
    keep: Path | None = None
    cells: Sequence[tuple[str, str]] | None = None
    """Exactly these (journal, store) cells, instead of every journal with every store."""
    settle_sessions: int = 240
    """Sessions of the settlement throughput phase, each with one failed intent (0: no phase)."""
    settle_seconds: float = 12.0
    """How long the workers of that phase may go on before they stop. With the bounds on
    preparing (10 s) and on the workers' start (5 s), a journal's phase ends within about
    30 s; it usually takes a few."""


@dataclass
class FleetResults:
    """What a fleet run found: the judge's counts per cell, and the settlement throughput
    phase per journal."""

    cells: list[CellResult] = field(default_factory=list)
    settlement: list[SettleResult] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return all(r.clean for r in self.cells) and all(r.clean for r in self.settlement)


# -- one cell --------------------------------------------------------------------------------


@dataclass
class _Worker:
    name: str
    pid: int


@dataclass
class _Cell:
    journal: str
    store: str
    directory: Path
    spec: dict[str, Any]
    proxied: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Server name -> (its URL, the proxy's port), for the servers a proxy sits in front of."""
    proxies: dict[str, FaultProxy] = field(default_factory=dict)
    label: str = ""
    """The store's name in the tables (with `` wait=N`` for a cell with the replica wait)."""


class _Driver:
    def __init__(
        self,
        options: FleetOptions,
        forks: ForkServer,
        proxies: ProxyLoop,
        servers: OwnServers | None,
        chooser: random.Random,
        cluster: ClusterFaults | None = None,
    ) -> None:
        self.options = options
        self.forks = forks
        self.proxies = proxies
        self.servers = servers
        self.chooser = chooser
        self.cluster = cluster
        self.hosts = 0

    def host(self) -> str:
        """A host name no process of this run had."""
        self.hosts += 1
        return f"host{self.hosts}"

    def _spec(self, cell: _Cell, name: str, *, proxied: bool) -> dict[str, Any]:
        spec = dict(cell.spec)
        spec.update(
            name=name,
            host=self.host(),
            log=str(cell.directory / f"{name}.log"),
            seed=self.chooser.randrange(1 << 30),
        )
        if proxied:
            for url, port in cell.proxied.values():
                for role in ("journal", "store"):
                    kind, address, namespace = spec[role]
                    if address == url:
                        spec[role] = [kind, through(url, port), namespace]
        return spec

    def run(self, cell: _Cell, result: CellResult) -> list[Pause]:
        options = self.options
        workers: list[_Worker] = []
        count = 0

        def start(slot: int) -> _Worker:
            nonlocal count
            name = f"w{count}"
            count += 1
            spec = self._spec(cell, name, proxied=slot % 2 == 0)
            return _Worker(name, self.forks.spawn(spec))

        workers = [start(slot) for slot in range(options.workers)]
        kinds = ["kill", "pause", "pause_in_flight"]
        if cell.proxies:
            kinds.append("drop_reply")
        restartable = [s for s in cell.proxied if self.servers and s in self.servers.urls]
        if restartable:
            kinds.append("restart")
        on_cluster = self.cluster is not None and CLUSTER in (
            cell.journal,
            cell.store.removeprefix("revisioned_"),
        )
        if on_cluster and self.cluster is not None:
            kinds += self.cluster.kinds()
        pauses: list[Pause] = []
        order: list[str] = []
        time.sleep(0.5)  # let the workers open their sessions
        for _ in range(options.rounds):
            if not order:
                order = list(kinds)
                self.chooser.shuffle(order)
            kind = order.pop()
            slot = self.chooser.randrange(len(workers))
            worker = workers[slot]
            if not alive(worker.pid):
                workers[slot] = start(slot)
                continue
            began = time.time()
            if kind == "kill":
                os.kill(worker.pid, signal.SIGKILL)
                workers[slot] = start(slot)
                result.injected(kind, worker.name, began)
            elif kind in ("pause", "pause_in_flight"):
                pause = self._pause(worker, in_flight=kind == "pause_in_flight")
                if pause is None:
                    # It never reached an append in time, and would stop itself later with
                    # nobody to resume it: replaced instead.
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(worker.pid, signal.SIGKILL)
                    workers[slot] = start(slot)
                    result.injected("kill", worker.name, began)
                else:
                    pauses.append(pause)
                    result.injected(kind, worker.name, began)
            elif kind == "drop_reply":
                name = self.chooser.choice(sorted(cell.proxies))
                if self.proxies.lose_next_reply(cell.proxies[name], 2.0):
                    result.injected(kind, f"the proxy to {name}", began)
            elif kind == "restart":
                assert self.servers is not None
                server = self.chooser.choice(restartable)
                self.servers.restart(server)
                result.injected(kind, server, began)
            else:
                assert self.cluster is not None
                self.cluster.inject(kind, cell.spec, self.chooser, result)
            result.rounds += 1
            time.sleep(self.chooser.uniform(0.1, 0.4))
        for worker in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGCONT)
                os.kill(worker.pid, signal.SIGTERM)
        self.forks.wait(20 + options.in_flight_wait * 4)
        return pauses

    def _pause(self, worker: _Worker, *, in_flight: bool) -> Pause | None:
        if in_flight:
            os.kill(worker.pid, signal.SIGUSR1)
            deadline = time.monotonic() + 5
            while process_state(worker.pid) != "T":
                if time.monotonic() > deadline or not alive(worker.pid):
                    return None
                time.sleep(_STATE_POLL)
        else:
            os.kill(worker.pid, signal.SIGSTOP)
        stopped = time.time()
        time.sleep(self.options.pause)
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGCONT)
        return Pause(worker.name, stopped, time.time(), in_flight)


# -- the run ---------------------------------------------------------------------------------


def _server_urls(options: FleetOptions, servers: OwnServers | None) -> dict[str, str]:
    urls = dict(servers.urls) if servers is not None else {}
    if options.redis_url:
        urls.setdefault("redis", options.redis_url)
    if options.postgres_url:
        urls.setdefault("postgres", options.postgres_url)
    if options.redis_cluster_url:
        urls.setdefault(CLUSTER, options.redis_cluster_url)
    return urls


def _chosen(options: FleetOptions) -> Sequence[tuple[str, str]]:
    return options.cells or [(j, s) for j in options.journals for s in options.stores]


def _cells(
    options: FleetOptions, urls: dict[str, str], root: Path, run_id: str, proxies: ProxyLoop
) -> Iterator[_Cell]:
    chosen = _chosen(options)
    waits = cluster_waits(options.replicas)
    for (journal, store), wait in ((c, w) for c in chosen for w in waits):
        server_of_store = store.removeprefix("revisioned_")
        needed = {journal, server_of_store} & set(_SERVER_OF)
        if not needed <= set(urls) or not cluster_pair(journal, store, wait, options.cells):
            continue
        directory = root / f"{journal}-{store}{f'-wait{wait}' if wait else ''}"
        directory.mkdir(parents=True)
        namespace = f"fleet_{run_id}_{journal}_{server_of_store}{f'_w{wait}' if wait else ''}"
        # Journal and store apart even on one server: each may be wiped on its own.
        journal_namespace = f"{namespace}_journal" if journal in urls else None
        journal_address = urls.get(journal) or str(directory / "journal.db")
        if store == "sqlite":
            store_address = str(directory / "chat.db")
        elif store == "revisioned_sqlite":
            store_address = str(directory / "revisioned.db")
        else:
            store_address = urls[server_of_store]
        if wait:
            timeout = options.replica_timeout
            journal_address = with_replica_wait(journal_address, wait, timeout, journal)
            store_address = with_replica_wait(store_address, wait, timeout, server_of_store)
        spec = {
            "role": "work",
            "journal": [journal, journal_address, journal_namespace],
            "store": [store, store_address, namespace],
            "sessions": [f"s{i}" for i in range(options.sessions)],
            "lease": options.lease,
            "in_flight_wait": options.in_flight_wait,
            "max_appends": 100_000,
            "think": 0.0,
            "final_attempts": 5,
        }
        cell = _Cell(
            journal, store, directory, spec, label=f"{store} wait={wait}" if wait else store
        )
        for server in sorted(needed - {CLUSTER}):  # a cluster client finds its nodes itself
            port = int(urlsplit(urls[server]).port or 0)
            proxy = proxies.proxy(port)
            cell.proxied[server] = (urls[server], proxy.port)
            cell.proxies[server] = proxy
        yield cell


async def _read_back(spec: dict[str, Any]) -> tuple[dict[str, list[Any]], list[Any]]:
    """Each session's history, read afresh, and every decision the journal holds."""
    from .fleet_worker import open_journal, open_store

    histories: dict[str, list[Any]] = {}
    for sid in spec["sessions"]:
        store = open_store(spec, sid)
        try:
            histories[sid] = list(await store.get_items())
        finally:
            closer = getattr(store, "close", None)
            if callable(closer):
                result = closer()
                if hasattr(result, "__await__"):
                    await result
    journal = open_journal(spec)
    try:
        decisions: list[Any] = []
        for sid in spec["sessions"]:
            decisions += await journal.decisions(session_id=sid, limit=100_000)
    finally:
        await journal.close()
    return histories, decisions


def _run_cell(driver: _Driver, cell: _Cell, out: IO[str]) -> CellResult:
    options = driver.options
    result = CellResult(cell.journal, cell.label, options.workers, options.sessions)
    if cell.proxies and not (driver.servers and set(cell.proxied) <= set(driver.servers.urls)):
        result.notes.append("no server restarts: the servers were not started by this command")
    began = time.time()
    pauses = driver.run(cell, result)
    ended = time.time()
    result.wall = ended - began
    # The final pass: a fresh process on a fresh host, after every lease has run out.
    time.sleep(options.lease * 1.5)
    final = dict(cell.spec, role="reconcile", name="final", host="reconciler")
    final["log"] = str(cell.directory / "final.log")
    driver.forks.spawn(final)
    driver.forks.wait(60)
    histories, decisions = asyncio.run(_read_back(cell.spec))
    judge_cell(result, cell.directory, histories, decisions, pauses, (began, ended))
    # Beside the workers' logs (kept with --keep): the decisions the judge read (payload-free)
    # and the faults, so a broken promise can be traced to the decisions and the fault.
    with (cell.directory / "decisions.jsonl").open("wb") as written:
        written.writelines(decision.encode() + b"\n" for decision in decisions)
    (cell.directory / "faults.jsonl").write_text(
        "".join(json.dumps(dataclasses.asdict(fault)) + "\n" for fault in result.timeline),
        encoding="utf-8",
    )
    print(render_cell(result) + "\n", file=out, flush=True)
    return result


# -- the settlement throughput phase ---------------------------------------------------------


def _settle_journals(options: FleetOptions, urls: dict[str, str]) -> list[str]:
    """The journals the run covers (those of its cells), when they are here."""
    wanted = [j for j, _ in options.cells] if options.cells else list(options.journals)
    return [j for j in dict.fromkeys(wanted) if j not in _SERVER_OF or j in urls]


def _wait_files(paths: list[Path], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not all(path.exists() for path in paths):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _run_settlement(
    driver: _Driver, journal: str, urls: dict[str, str], root: Path, run_id: str
) -> SettleResult:
    """Prepare one failed intent per session, let every worker settle them at once, judge."""
    from .fleet_worker import settle_item

    options = driver.options
    directory = root / f"settle-{journal}"
    directory.mkdir(parents=True)
    sessions = [f"t{i}" for i in range(options.settle_sessions)]
    spec: dict[str, Any] = {
        "journal": [
            journal,
            urls.get(journal) or str(directory / "journal.db"),
            f"fleet_{run_id}_settle_{journal}" if journal in urls else None,
        ],
        "store": ["revisioned_sqlite", str(directory / "revisioned.db"), None],
        "sessions": sessions,
        "lease": options.lease,
        "in_flight_wait": options.in_flight_wait,
        "settle_seconds": options.settle_seconds,
        "go": str(directory / "go"),
    }
    result = SettleResult(journal, options.workers, len(sessions))

    def spawn(role: str, name: str, **extra: Any) -> None:
        log = str(directory / f"{name}.log")
        seed = driver.chooser.randrange(1 << 30)
        child = dict(spec, role=role, name=name, host=driver.host(), log=log, seed=seed)
        driver.forks.spawn(child | extra)

    spawn("prepare", "prepare")
    driver.forks.wait(10)
    ready = [directory / f"ready-s{n}" for n in range(options.workers)]
    for n, path in enumerate(ready):
        spawn("settle", f"s{n}", ready=str(path))
    if not _wait_files(ready, 5):
        result.notes.append("not every worker was ready within 5 s")
    go = time.time()
    (directory / "go").touch()
    driver.forks.wait(options.settle_seconds + 3)
    histories, decisions = asyncio.run(_read_back(spec))
    expected = {sid: str(settle_item(sid)["content"]) for sid in sessions}
    judge_settlement(result, directory, histories, decisions, expected, go)
    return result


# -- the run ---------------------------------------------------------------------------------


def run_fleet(options: FleetOptions, out: TextIO = sys.stdout) -> int:
    """Run every cell and the settlement phase; print their tables and the summary. 0 when
    every count is 0."""
    results = fleet_results(options, out)
    return 0 if results.cells and results.clean else 1


def fleet_results(options: FleetOptions, out: TextIO = sys.stdout) -> FleetResults:
    """Run every cell the options select (a cell whose server is not given is skipped), then
    the settlement throughput phase once per journal; print a table per cell, the phase's
    table and the summary; return what the judge found."""
    seed = options.seed if options.seed is not None else random.randrange(1 << 30)
    chooser = random.Random(seed)
    root = options.keep or Path(tempfile.mkdtemp(prefix="agents-reconcile-fleet-"))
    root.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:8]
    started = time.monotonic()
    servers: OwnServers | None = None
    own_cluster: OwnCluster | None = None
    proxies = ProxyLoop()
    forks: ForkServer | None = None
    found = FleetResults()
    results = found.cells
    try:
        if options.own_servers:
            servers = OwnServers(out)
            servers.start()
            if any(CLUSTER in pair for pair in _chosen(options)):
                own_cluster = OwnCluster(out)
                if own_cluster.start():
                    servers.urls[CLUSTER] = own_cluster.url
        urls = _server_urls(options, servers)
        forks = ForkServer()
        print(
            f"Fleet self-test: {options.workers} workers, {options.sessions} sessions, "
            f"{options.rounds} rounds per cell, lease {options.lease} s, pauses "
            f"{options.pause} s, seed {seed}. Workers on revisioned stores run with "
            'on_extended="append" (a fleet shares its sessions).',
            file=out,
        )
        if not forks.namespaces:
            print(
                "Note: no UTS namespaces here (unshare not permitted): every worker shares "
                "this host's name, so a paused worker's pid is seen alive and no lease expires.",
                file=out,
            )
        skipped = [name for name in ("redis", "postgres", CLUSTER) if name not in urls]
        if skipped:
            print(f"Skipped (no server given): {', '.join(skipped)} cells.", file=out)
        if urls and servers is None:
            print(
                "Server restarts skipped: the servers were not started by this command.", file=out
            )
        print(file=out, flush=True)
        cluster = ClusterFaults(urls[CLUSTER], own_cluster) if CLUSTER in urls else None
        driver = _Driver(options, forks, proxies, servers, chooser, cluster)
        for cell in _cells(options, urls, root, run_id, proxies):
            results.append(_run_cell(driver, cell, out))
        if options.settle_sessions > 0:
            for journal in _settle_journals(options, urls):
                found.settlement.append(_run_settlement(driver, journal, urls, root, run_id))
            if found.settlement:
                print(settlement_title(options.settle_sessions, options.workers), file=out)
                print(render_settlement(found.settlement) + "\n", file=out, flush=True)
    finally:
        if forks is not None:
            forks.close()
        proxies.close()
        if servers is not None:
            servers.stop()
        if own_cluster is not None:
            own_cluster.stop()
        if options.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print_totals(found.cells, found.settlement, time.monotonic() - started, out)
    return found
