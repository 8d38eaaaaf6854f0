"""``RedisClusterJournal``: the Redis journal on a Redis Cluster (``redis+cluster://``).

The same scripts as on one server (``journal.py``), each given the keys of one bucket
(``layout.py``): a session's keys and its bucket's copy of the journal's global keys, all in one
slot, so the cluster client sends each script to the node owning that slot. What needs more than
one bucket is done in steps, none of them a script across slots:

- an intent id is claimed for its session in the id's own bucket before it is recorded
  (``homes.ClaimedHomes``), which keeps an id one session's in the whole journal;
- a settlement by a decision of a session in another bucket than the intent's is two steps:
  the intent is removed (and marked settled) where its session is (``scripts/release.lua``,
  under the same claim check), then the decision stored and counted where its session is;
- the journal-wide reads ask every bucket at once, one pipeline per node (``reads.py``; the
  effects, aside and pages components, ``redis/effects.py``, ``redis/aside.py``,
  ``redis/pages.py``), and so do the retention component (``redis/retention.py``) and the
  schema's version (``link.py``).

The one-step append of a journal and a store on one server (``fused.py``) is not used: a
cluster client names no single server (``backend.server_of``).
"""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar, Final

from ...._core.ownership import Owner
from ...._core.records import Decision
from ....errors import ConfigurationError, IntentConflict, JournalUnavailable, LeaseLost
from ...connections import Connections
from ...journal import IntentState, require_settling
from ...lua import LuaScript
from ...redaction import Redacted
from .. import replies
from ..backend import shared_client
from ..journal import _DEFAULT_OPTIONS, _SCRIPTS, DEFAULT_PREFIX, RedisJournal
from ..link import SCHEMA, SCHEMA_VERSION, VERSION
from ..nodes import RedisCluster, cluster_client
from ..replicas import ReplicaWait
from ..replicas import split as split_wait
from .claims import ClusterClaims
from .layout import BucketKeys
from .reads import ClusterReads

try:
    from redis import exceptions as redis_errors
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ConfigurationError(
        "the Redis journal needs redis-py: pip install 'agents-reconcile[redis]'"
    ) from exc

__all__ = ["SCHEMA", "SCHEMA_VERSION", "RedisClusterJournal"]

_CLUSTER_SCRIPTS: Final = {
    name: LuaScript("agents_reconcile._backends.redis", "scripts", name, prelude=True)
    for name in ("claim", "release")
}


class RedisClusterJournal(
    ClusterClaims,
    ClusterReads,
    RedisJournal,
):
    """``IntentJournal`` on a Redis Cluster, with every component built on its link, shared by
    every worker that uses the same cluster and ``prefix``.

    The constructor takes a ``redis.asyncio.cluster.RedisCluster`` the caller owns (it should
    not decode responses, nor read from replicas; ``close()`` leaves it open); ``from_url``
    builds journals that share one client per URL, options and event loop."""

    _Layout: ClassVar[type[BucketKeys]] = BucketKeys
    _on_cluster: ClassVar[bool] = True
    _named: ClassVar[str] = "Redis Cluster journal"
    _scripts: ClassVar[dict[str, LuaScript]] = {**_SCRIPTS, **_CLUSTER_SCRIPTS}
    _layout: BucketKeys

    def __init__(
        self,
        client: RedisCluster | None,
        *,
        prefix: str = DEFAULT_PREFIX,
        where: str | None = None,
        connections: Connections[Any] | None = None,
        replica_wait: ReplicaWait | None = None,
    ) -> None:
        given: Any = client
        super().__init__(
            given, prefix=prefix, where=where, connections=connections, replica_wait=replica_wait
        )

    @classmethod
    def from_url(
        cls, url: str, *, prefix: str = DEFAULT_PREFIX, **options: Any
    ) -> RedisClusterJournal:
        """A journal on the cluster at ``url`` (``redis+cluster://HOST:PORT,HOST:PORT``, or
        ``rediss+cluster://``). ``options`` go to ``RedisCluster`` (for example
        ``socket_timeout``); connections are opened on first use. The URL's password never
        appears in messages. ``?replicas=N&replica_timeout=S`` in the query makes each write wait
        for N replicas (``replicas.py``)."""
        url, wait = split_wait(url)
        address = Redacted.of(url)
        settings = {**_DEFAULT_OPTIONS, **options, "decode_responses": False}
        shared = shared_client("redis-journal", url, settings)  # checks the URL first
        try:
            cluster_client(url, settings)  # checks the options now; connects nothing
        except (
            ValueError,
            TypeError,
            redis_errors.RedisError,
            redis_errors.RedisClusterException,
        ) as exc:
            detail = address.scrub(str(exc))
            raise ConfigurationError(
                f"invalid Redis Cluster journal URL {address}: {detail}"
            ) from None
        return cls(None, prefix=prefix, where=url, connections=shared, replica_wait=wait)

    def __repr__(self) -> str:
        return f"RedisClusterJournal({self._address.shown!r}, prefix={self.prefix!r})"

    # -- what differs from one server ----------------------------------------------------------

    async def settle(
        self, decision: Decision, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        require_settling(decision, settling=True)
        intent_id = decision.intent_id
        record = decision.encode()
        deciding = decision.session_id
        bucket = self._layout.of(deciding)
        token = "" if fence is None else str(fence)

        def unclaimed() -> LeaseLost:
            return LeaseLost(
                f"intent {intent_id} is not claimed by {owner}"
                + ("" if fence is None else f" with token {fence}"),
                intent_id=intent_id,
            )

        async def attempt(session_id: str | None) -> replies.Moved | None:
            fenced = owner is not None
            if session_id is not None and self._layout.number(session_id) != self._layout.number(
                deciding
            ):
                # Held in another bucket: removed there first (the claim checked), then settled
                # here as an intent no session holds.
                args: list[str | bytes] = [
                    VERSION,
                    intent_id,
                    session_id,
                    "1" if fenced else "0",
                    "" if owner is None else str(owner),
                    IntentState.RECONCILING.value,
                    token,
                ]
                keys = self._layout.scripted(session_id)
                word, parts = replies.status(
                    await self._link.script("release", keys, args), "settle"
                )
                if word == "moved":
                    return replies.moved(parts, "settle")
                if word == "unclaimed" and len(parts) == 1:
                    raise unclaimed()
                if word != "done" or len(parts) != 1:
                    raise replies.unexpected("settle", parts)
                session_id, fenced = None, False
            args = [
                VERSION,
                intent_id,
                "0" if session_id is None else "1",
                "" if session_id is None else session_id,
                "1" if fenced else "0",
                str(owner) if fenced else "",
                IntentState.RECONCILING.value,
                str(decision.backend),
                record,
                token if fenced else "",
            ]
            holding = bucket.session(deciding if session_id is None else session_id)
            keys = [*bucket.globals, *holding, *bucket.session(deciding)]
            word, parts = replies.status(await self._link.script("settle", keys, args), "settle")
            if word == "moved":
                return replies.moved(parts, "settle")
            if len(parts) != 1:
                raise replies.unexpected("settle", parts)
            if word == "done":
                self._homes.forget(intent_id)
                return None
            if word == "settled":
                raise IntentConflict(f"intent {intent_id} was already settled", intent_id=intent_id)
            if word == "unclaimed":
                raise unclaimed()
            raise replies.unexpected("settle", parts)

        await self._homes.on_intent(intent_id, attempt)

    async def close(self) -> None:
        """Let the claims that wait go, then release the connections (a client passed in stays
        open); a later operation opens them again."""
        # One left behind only keeps its id from other sessions.
        with contextlib.suppress(JournalUnavailable):
            await self._homes.let_go_now()
        await super().close()

    async def drop(self) -> int:
        """Delete every key of this journal, on every primary; for tests and operators."""
        return await super().drop()
