"""The fleet self-test on a Redis Cluster (``fleet``): a private cluster of six nodes it may
kill nodes of, and the two faults of cells on a cluster.

- ``failover``: ``CLUSTER FAILOVER`` sent to the replica of a primary that holds keys of the
  cell (a slot in use): a graceful handover, the replica takes over once it has caught up with
  its primary, so no acknowledged write should be lost;
- ``kill_primary``: SIGKILL a primary that holds keys of the cell; its replica takes over
  after the node timeout, then the killed node starts again (from its ``nodes.conf``) and
  rejoins as a replica of its former replica. Only on a cluster this process started
  (``OwnCluster``): never on one it was given.

A given cluster (one named by the environment) gets ``failover`` alone.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO
from urllib.parse import urlsplit, urlunsplit

from .fleet_hosts import wait_port
from .fleet_report import CellResult

__all__ = [
    "CLUSTER",
    "ClusterControl",
    "ClusterFaults",
    "OwnCluster",
    "cluster_pair",
    "cluster_waits",
    "with_replica_wait",
]

CLUSTER: Final = "redis_cluster"
"""The journal's name in the self-test (``revisioned_redis_cluster`` the store's)."""
_WITH_OTHERS: Final = frozenset({(CLUSTER, "sqlite"), (CLUSTER, "revisioned_sqlite")})
"""The cells a cluster makes with what is not a cluster, unless cells are named."""
NODE_TIMEOUT_MS: Final = 2000
"""The private cluster's node timeout: a killed primary's replica takes over after it."""
_NODES: Final = 6
_SETTLE: Final = 20.0
"""Seconds a fault may take to settle (a replica promoted, a node back) before it is noted."""
_POLL: Final = 0.05


def cluster_waits(replicas: int) -> tuple[int, ...]:
    """The replica waits each cluster cell runs with: none, then ``replicas`` if given."""
    return (0, replicas) if replicas > 0 else (0,)


def cluster_pair(
    journal: str, store: str, wait: int, named: Sequence[tuple[str, str]] | None
) -> bool:
    """Whether a journal x store pair (with the replica ``wait``) is a cell: the wait is for
    cells on a cluster; unless cells are named, a cluster pairs with itself and with the
    SQLite stores only."""
    sides = (journal, store.removeprefix("revisioned_"))
    if CLUSTER not in sides:
        return not wait
    return bool(named) or sides[0] == sides[1] or (journal, store) in _WITH_OTHERS


def with_replica_wait(url: str, replicas: int, timeout: float, server: str = CLUSTER) -> str:
    """``url`` with the replica wait asked in its query (``replicas``, ``replica_timeout``),
    for an address on a cluster (any other is given back as it is)."""
    if server != CLUSTER:
        return url
    parts = urlsplit(url)
    asked = f"replicas={replicas}&replica_timeout={timeout:g}"
    query = f"{parts.query}&{asked}" if parts.query else asked
    return urlunsplit(parts._replace(query=query))


@dataclass(frozen=True)
class _Node:
    id: str
    port: int
    primary: bool
    primary_id: str
    healthy: bool
    slots: bool


def _client(port: int) -> Any:
    import redis

    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, socket_connect_timeout=2)


def _ask(port: int, *command: str) -> Any:
    client = _client(port)
    try:
        return client.execute_command(*command)
    finally:
        client.close()


class ClusterControl:
    """The nodes of a cluster on loopback, seen through any node that answers, and the
    ``failover`` fault."""

    def __init__(self, url: str) -> None:
        netloc = urlsplit(url).netloc.rpartition("@")[2]
        self.seeds = [int(seed.rpartition(":")[2]) for seed in netloc.split(",") if seed]

    def nodes(self, ports: list[int] | None = None) -> list[_Node]:
        """Every node, as the first node that answers sees them."""
        for port in [*(ports or []), *self.seeds]:
            try:
                raw = _ask(port, "CLUSTER", "NODES")
            except Exception:
                continue
            text = raw.decode() if isinstance(raw, bytes) else str(raw)
            return [self._node(line) for line in text.splitlines() if line.strip()]
        return []

    @staticmethod
    def _node(line: str) -> _Node:
        fields = line.split()
        flags = fields[2].split(",")
        port = int(fields[1].split("@")[0].rpartition(":")[2])
        healthy = not {"fail", "fail?", "handshake", "noaddr"} & set(flags)
        healthy = healthy and fields[7] == "connected"
        return _Node(fields[0], port, "master" in flags, fields[3], healthy, len(fields) > 8)

    def in_use(self, prefixes: list[str], ports: list[int] | None = None) -> list[_Node]:
        """The healthy primaries that hold keys under one of ``prefixes`` (a slot in use)."""
        found = []
        for node in self.nodes(ports):
            if not (node.primary and node.healthy and node.slots):
                continue
            with contextlib.suppress(Exception):
                client = _client(node.port)
                try:
                    if any(
                        client.scan(0, match=f"{prefix}*", count=10_000)[1] for prefix in prefixes
                    ):
                        found.append(node)
                finally:
                    client.close()
        return found

    def replica_of(self, primary: _Node, ports: list[int] | None = None) -> _Node | None:
        replicas = [
            n for n in self.nodes(ports) if n.primary_id == primary.id and n.healthy
        ]  # fmt: skip
        return replicas[0] if replicas else None

    def failover(self, primary: _Node, ports: list[int] | None = None) -> str | None:
        """``CLUSTER FAILOVER`` on a replica of ``primary``; once the replica is a primary and
        the cluster is whole again, None; else what went wrong."""
        replica = self.replica_of(primary, ports)
        if replica is None:
            return f"no healthy replica of the primary on port {primary.port}"
        try:
            _ask(replica.port, "CLUSTER", "FAILOVER")
        except Exception as exc:
            return f"CLUSTER FAILOVER on port {replica.port} refused: {exc}"
        if not self.wait_primary(replica.port):
            return f"the replica on port {replica.port} was not promoted within {_SETTLE:.0f} s"
        return None if self.wait_whole(ports) else "the cluster was not whole again in time"

    def wait_primary(self, port: int) -> bool:
        deadline = time.monotonic() + _SETTLE
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                role = _ask(port, "ROLE")
                if role and role[0] in (b"master", "master"):
                    return True
            time.sleep(_POLL)
        return False

    def wait_whole(self, ports: list[int] | None = None, *, seconds: float = _SETTLE) -> bool:
        """Whether, within ``seconds``, every node is healthy and every primary has a healthy
        replica whose link is up."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            nodes = self.nodes(ports)
            primaries = [n for n in nodes if n.primary and n.slots]
            if (
                len(nodes) == _NODES
                and all(n.healthy for n in nodes)
                and all(self._replica_linked(p, nodes) for p in primaries)
            ):
                return True
            time.sleep(_POLL * 4)
        return False

    @staticmethod
    def _replica_linked(primary: _Node, nodes: list[_Node]) -> bool:
        for node in nodes:
            if node.primary_id == primary.id:
                with contextlib.suppress(Exception):
                    info = _ask(node.port, "INFO", "replication")
                    text = info if isinstance(info, dict) else {}
                    if text.get("master_link_status") == "up":
                        return True
        return False


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _node_ports() -> list[int]:
    """Six free loopback ports whose cluster bus ports (each plus 10000) are free too."""
    chooser = random.Random()
    ports: list[int] = []
    while len(ports) < _NODES:
        port = chooser.randrange(20_000, 30_000)
        if port not in ports and _bindable(port) and _bindable(port + 10_000):
            ports.append(port)
    return ports


class OwnCluster:
    """A private Redis Cluster of six nodes (three primaries, a replica each) on free loopback
    ports under a directory of its own, started, killed, restarted and stopped by this process
    only (by the PIDs it holds)."""

    def __init__(self, out: TextIO) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="agents-reconcile-fleet-cluster-"))
        self.out = out
        self.ports: list[int] = []
        self._processes: dict[int, subprocess.Popen[bytes]] = {}
        self.url = ""

    def start(self) -> bool:
        """Start the nodes and join them; False (said on ``out``) when that cannot be done."""
        if not (shutil.which("redis-server") and shutil.which("redis-cli")):
            print("No redis-server or redis-cli here: no private Redis Cluster.", file=self.out)
            return False
        self.ports = _node_ports()
        for port in self.ports:
            self._start_node(port)
        create = subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
             "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True, timeout=60, check=False,
        )  # fmt: skip
        seeds = ",".join(f"127.0.0.1:{port}" for port in self.ports[:3])
        self.url = f"redis+cluster://{seeds}"
        if create.returncode != 0 or not self.control().wait_whole(self.ports, seconds=60):
            print("The private Redis Cluster did not come up.", file=self.out)
            return False
        return True

    def control(self) -> ClusterControl:
        return ClusterControl(self.url)

    def _start_node(self, port: int) -> None:
        folder = self.directory / str(port)
        folder.mkdir(parents=True, exist_ok=True)
        self._processes[port] = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
             "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file",
             "nodes.conf", "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--dir", str(folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        if not wait_port(port, 10):
            raise RuntimeError(f"a node of the private Redis Cluster (port {port}) did not start")

    def kill_primary(self, primary: _Node) -> str | None:
        """SIGKILL ``primary``; once its replica took over, start it again; once it rejoined as
        a replica and the cluster is whole, None; else what went wrong."""
        control = self.control()
        replica = control.replica_of(primary, self.ports)
        process = self._processes.get(primary.port)
        if replica is None or process is None:
            return f"no healthy replica of the primary on port {primary.port}, or not ours"
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        promoted = control.wait_primary(replica.port)
        self._start_node(primary.port)
        if not promoted:
            return f"the replica on port {replica.port} was not promoted within {_SETTLE:.0f} s"
        return None if control.wait_whole(self.ports) else "the cluster was not whole in time"

    def stop(self) -> None:
        for process in self._processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self._processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        self._processes.clear()
        shutil.rmtree(self.directory, ignore_errors=True)


KEYS_WAIT: Final = 10.0
"""How long a cluster fault waits for a primary to hold keys of its cell (seconds)."""


class ClusterFaults:
    """The faults of cells on a cluster: ``failover`` on any, ``kill_primary`` on ``own``."""

    def __init__(self, url: str, own: OwnCluster | None) -> None:
        self.own = own
        self.control = own.control() if own is not None else ClusterControl(url)
        self.ports = own.ports if own is not None else None

    def kinds(self) -> list[str]:
        return ["failover", "kill_primary"] if self.own is not None else ["failover"]

    def inject(
        self, kind: str, spec: dict[str, Any], chooser: random.Random, result: CellResult
    ) -> None:
        """Inject ``kind`` on a primary holding keys of the cell ``spec`` names; count it in
        ``result``, or note why it could not be done."""
        prefixes = [spec[role][2] for role in ("journal", "store") if spec[role][2]]
        # The workers write their first keys soon after they start, later on a busy machine:
        # waited for a while, so that the fault is not skipped for want of them.
        deadline = time.monotonic() + KEYS_WAIT
        while not (primaries := self.control.in_use(prefixes, self.ports)):
            if time.monotonic() >= deadline:
                _note(result, f"{kind}: no primary holds keys of the cell yet")
                return
            time.sleep(0.1)
        primaries.sort(key=lambda n: n.port)
        primary = chooser.choice(primaries)
        began = time.time()
        if kind == "kill_primary" and self.own is not None:
            trouble = self.own.kill_primary(primary)
        else:
            trouble = self.control.failover(primary, self.ports)
        if trouble is None:
            result.injected(kind, f"the primary on port {primary.port}", began)
        else:
            _note(result, f"{kind}: {trouble}")


def _note(result: CellResult, note: str) -> None:
    if note not in result.notes:
        result.notes.append(note)
