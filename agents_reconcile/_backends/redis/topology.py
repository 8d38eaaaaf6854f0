"""What a Redis journal runs on (``Topology``): one server (``ONE_SERVER``: the journal's keys
laid out once, ``layout.JournalKeys``) or a Redis Cluster (``CLUSTER``: in 256 buckets of one
slot each, ``cluster/layout.py``). A journal's class chooses one (``journal.RedisJournal``,
``journal.RedisClusterJournal``); all else follows from the layout it gives and from whether
its client is a cluster's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ..connections import Connections
from .backend import server_client, shared_client
from .cluster.layout import BucketKeys
from .layout import JournalKeys, KeyLayout
from .nodes import cluster_client

__all__ = ["CLUSTER", "ONE_SERVER", "Topology"]


@dataclass(frozen=True)
class Topology:
    """What a Redis journal runs on (one server, or a cluster), the one thing its class
    chooses; all else follows from the layout it gives."""

    named: str
    """What messages call the journal."""
    layout: Callable[[str], KeyLayout]
    """Its key layout, given the prefix."""
    on_cluster: bool
    """Whether its client is a cluster's (``link.RedisLink``)."""
    connect: Callable[[str, dict[str, Any]], Connections[Any]]
    """The client shared by the journals on a URL with options, both checked first (an error
    of the driver's, or ``ValueError`` or ``TypeError``, when they are wrong)."""


def _connect_server(url: str, settings: dict[str, Any]) -> Connections[Any]:
    server_client(url, settings)  # checks the URL and options now; connects nothing
    return shared_client("redis-journal", url, settings)


def _connect_cluster(url: str, settings: dict[str, Any]) -> Connections[Any]:
    shared = shared_client("redis-journal", url, settings)  # checks the URL first
    cluster_client(url, settings)  # checks the options now; connects nothing
    return shared


ONE_SERVER: Final = Topology(
    named="Redis journal", layout=JournalKeys, on_cluster=False, connect=_connect_server
)
CLUSTER: Final = Topology(
    named="Redis Cluster journal", layout=BucketKeys, on_cluster=True, connect=_connect_cluster
)
