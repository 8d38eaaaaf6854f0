"""``RedisClusterJournal``: the Redis journal on a Redis Cluster (``redis+cluster://``).

It is ``RedisJournal`` given the cluster's topology: the same class runs the same scripts, each
given the keys of one bucket (``layout.py``): a session's keys and its bucket's copy of the
journal's global keys, all in one slot, so the cluster client sends each script to the node
owning that slot. What needs more than one bucket is done in steps, none of them a script
across slots, where the layout or the homes it chose say (``redis/journal.py``,
``redis/homes.py``):

- an intent id is claimed for its session in the id's own bucket before it is recorded
  (``homes.ClaimedHomes``), which keeps an id one session's in the whole journal; the claims
  that wait to go go when the journal closes;
- a settlement by a decision of a session in another bucket than the intent's is two steps:
  the intent is removed (and marked settled) where its session is (``scripts/release.lua``,
  under the same claim check), then the decision stored and counted where its session is;
- the journal-wide reads ask every bucket at once, one pipeline per node, and so do the
  effects, aside, pages and retention components (``redis/effects.py``, ``redis/aside.py``,
  ``redis/pages.py``, ``redis/retention.py``) and the schema's version (``link.py``).

The one-step append of a journal and a store on one server (``fused.py``) is not used: a
cluster client names no single server (``backend.server_of``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from ...connections import Connections
from ..backend import shared_client
from ..journal import RedisJournal, Topology
from ..link import SCHEMA, SCHEMA_VERSION
from ..nodes import cluster_client
from .layout import BucketKeys

__all__ = ["CLUSTER", "SCHEMA", "SCHEMA_VERSION", "RedisClusterJournal"]


def _cluster_client(url: str, settings: dict[str, Any]) -> Connections[Any]:
    shared = shared_client("redis-journal", url, settings)  # checks the URL first
    cluster_client(url, settings)  # checks the options now; connects nothing
    return shared


CLUSTER: Final = Topology(
    named="Redis Cluster journal", layout=BucketKeys, on_cluster=True, connect=_cluster_client
)


class RedisClusterJournal(RedisJournal):
    """``IntentJournal`` on a Redis Cluster, with every component built on its link, shared by
    every worker that uses the same cluster and ``prefix``.

    The constructor takes a ``redis.asyncio.cluster.RedisCluster`` the caller owns (it should
    not decode responses, nor read from replicas; ``close()`` leaves it open); ``from_url``
    (``redis+cluster://HOST:PORT,HOST:PORT``, or ``rediss+cluster://``; ``options`` go to
    ``RedisCluster``) builds journals that share one client per URL, options and event loop,
    and so does ``RedisJournal.from_url`` given such an address. The journal's namespace is its
    key prefix (``prefix=``, or ``?prefix=`` in the URL): every key is ``<prefix>:{bNNN}:...``,
    so a prefix may hold no braces of its own::

        RedisJournal.from_url("redis+cluster://10.0.0.1:7000,10.0.0.2:7000", prefix="tenant-a")
    """

    _topology: ClassVar[Topology] = CLUSTER
