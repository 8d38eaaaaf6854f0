"""The shared journal on Redis: one server that a fleet of workers records intents in.

Every operation that reads and then writes is one Lua script run on the server (the
``scripts/*.lua`` files shipped with the package, sent by ``wire.py``: one command each, its
bytes made in one pass, on a connection kept for the scripts), so no other client's command
runs between its check and its write:
``open_intent``, ``record``, ``transition``, ``settle``, ``discard``, ``note``,
``count_write``, the effect scripts (``effects.py``) and pruning (``retention.py``). Scripts
receive every key they touch in ``KEYS``. Records are stored as ``PendingWrite.encode()``,
``Decision.encode()`` and ``Effect.encode()`` produce them, digest included, and are checked
again on every read.

Round trips. A write-ahead session calls ``open_intent`` and then ``discard`` on every
append, so each is one command: the writing scripts check (and on first use store) the
schema version themselves, with no separate check first, and ``discard``, ``transition``
and ``settle`` take the intent's session from where this object last saw the intent
(``open_intent`` and ``record`` note it). When that hint is missing, one ``HGET`` on
``index`` finds the session first; when it is stale, the script replies with the session
holding the intent and the call is made again there.

Keys, each under ``{prefix}:`` (``layout.py`` builds their names)::

    schema            string   layout version (4); refused when not this release's
    floor             string   the highest write count pruned: a session without a count
                               reads as it (absent: 0)
    index             hash     unresolved intent id -> its session id
    listing           zset     every unresolved intent as ``layout.listed(session, id)``, score
                               0: status pages it by ZRANGEBYLEX from a cursor, in byte order
    settled           set      ids of settled intents
    seq               string   counter numbering decisions
    log               list     every decision's number, oldest first
    decided           hash     intent id -> its decisions' numbers, oldest first
    decision          hash     decision number -> encoded decision
    effect_index      hash     effect key -> its session id
    effect_started    zset     keys of effects started and without a receipt, by begin time
    {T}:intents       hash     intent id -> the unresolved intent's row (``layout.ROW``): its
                               state, fencing token (the session's write count when it was
                               opened; raised by each claim), when its state or owner last
                               changed, created_at, backend identity, owner and encoded intent,
                               in one value
    {T}:write_count   hash     backend identity -> the session's write count; and '' (no
                               backend identity is empty) -> when one was last raised, on the
                               server's clock: the session's idle time, for pruning
    {T}:decisions     list     the session's decisions' numbers, oldest first
    {T}:effect_order  list     the session's effect keys, oldest first
    {T}:effect_record hash     effect key -> encoded effect
    {T}:effect_state  hash     effect key -> state (started, done)
    {T}:effect_owner  hash     effect key -> owner
    {T}:effect_updated hash    effect key -> when state, owner or record last changed

``T`` is the session's hash tag; the id itself is kept in ``index``. A session's unresolved
intents are few (one per backend at most, while no operator is needed): a script reads them
all with one ``HGETALL``, and sorts them by ``created_at``, then id.

The cost of an append (``open_intent``, the previous intent of the session cleared in the same
script): one round trip, a script of about a dozen commands: the version read, the session's
intents read, the cleared one's row, listing member and index entry removed, the count read,
the id looked up in ``index`` and ``settled``, the new row, index entry and listing member
written, the server's time read and the count written with its stamp.

The layout version is only a number: ``migrate`` (and the first use of a journal object, a
read or a write) stores it in an empty journal (``link.py``), and a journal holding any other
version is refused; one of the layouts before 4 (a hash per field of an intent, never
released) is refused as such, with what to do.

An address may ask every writing script to wait for replicas (``?replicas=N``): the script is
then sent once, and ``WAIT`` follows it on the same connection (``replicas.py``).

The journal is as durable as the server keeps its data: run it with ``appendonly yes``
(``appendfsync always`` to survive power loss) and ``maxmemory-policy noeviction``, since an
evicted key loses intents or decisions.

This layout is for one Redis server (with replicas and failover if needed): each writing
script also touches global keys (``schema`` always; ``floor`` for those that count a write or
read a count; ``index``, ``listing`` and ``settled`` for record, open_intent, transition,
discard and settle; the decision log for settle and note; ``effect_index`` and
``effect_started`` for the effect scripts; all of them for pruning), which hash to other slots
than the sessions'.

On a Redis Cluster (``redis+cluster://``), ``RedisClusterJournal`` is this class given the
cluster's topology (``topology.CLUSTER``): the same class runs the same scripts, each given the
keys of one bucket of 256 (``cluster/layout.py``): a session's keys and its bucket's copy of the
journal's global keys, all in one slot, so the cluster client sends each script to the node
owning that slot. What needs more than one bucket is done in steps, none of them a script
across slots, where the layout or the homes it chose say (``homes.py``):

- an intent id is claimed for its session in the id's own bucket before it is recorded
  (``homes.ClaimedHomes``), which keeps an id one session's in the whole journal; the claims
  that wait to go go when the journal closes; an intent is looked up, and its settled mark
  read, where the claims say;
- a settlement by a decision of a session in another bucket than the intent's is two steps:
  the intent is removed (and marked settled) where its session is (``scripts/release.lua``,
  under the same claim check), then the decision stored and counted where its session is
  (``settle.lua``);
- the journal-wide reads ask every bucket at once, one pipeline per node, and so do the
  effects, aside, pages and retention components (``effects.py``, ``aside.py``, ``pages.py``,
  ``retention.py``) and the schema's version (``link.py``).

On one server each of these is the single command it always was. The one-step append of a
journal and a store on one server (``fused.py``) is not used on a cluster: a cluster client
names no single server (``backend.server_of``).
"""

from __future__ import annotations

import contextlib
import heapq
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final, Self, TypeVar, cast

from ..._core.ownership import Owner
from ..._core.records import BackendIdentity, Decision, PendingWrite
from ..._core.sealing import Keyring
from ...errors import ConfigurationError, IntentConflict, JournalUnavailable, LeaseLost
from ..addresses import chosen_prefix, split_prefix
from ..connections import Connections
from ..journal import (
    Capabilities,
    IntentState,
    JournalEntry,
    Opened,
    require_limit,
    require_settling,
)
from ..lua import LuaScript
from ..redaction import Redacted
from ..rows import each
from . import replies
from .aside import ASIDE_SCRIPTS, RedisAside
from .backend import client_location, client_secrets, unlink_matching
from .effects import EFFECT_SCRIPTS, RedisEffects
from .homes import ClaimedHomes, IndexedHomes, Retry
from .link import SCHEMA, SCHEMA_VERSION, VERSION, RedisLink
from .nodes import RedisCluster, is_cluster
from .pages import RedisPages
from .replicas import ReplicaWait
from .replicas import split as split_wait
from .retention import RETENTION_SCRIPTS, RedisRetention
from .sealing import RedisSealing
from .survey import RedisSurvey
from .topology import CLUSTER, ONE_SERVER, Topology

try:
    import redis.asyncio as aioredis
    from redis import exceptions as redis_errors
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ConfigurationError(
        "the Redis journal needs redis-py: pip install 'agents-reconcile[redis]'"
    ) from exc

__all__ = ["DEFAULT_PREFIX", "SCHEMA", "SCHEMA_VERSION", "RedisClusterJournal", "RedisJournal"]

DEFAULT_PREFIX: Final = "agents-reconcile-journal"

_SCRIPTS: Final = {
    name: LuaScript("agents_reconcile._backends.redis", "scripts", name, prelude=True)
    for name in (
        "decisions",
        "discard",
        "newest_decisions",
        "entries",
        "note",
        "note_again",
        "open_intent",
        "open_and_append",
        "record",
        "settle",
        "transition",
        "claim",  # a cluster's (homes.ClaimedHomes)
        "release",  # a cluster's settlement across buckets
        *EFFECT_SCRIPTS,
        *ASIDE_SCRIPTS,
        *RETENTION_SCRIPTS,
    )
}
_T = TypeVar("_T")
_DEFAULT_OPTIONS: Final[dict[str, Any]] = {
    "socket_connect_timeout": 5.0,
    "socket_timeout": 10.0,
}


class RedisJournal:
    """``IntentJournal`` on a Redis server, with every component built on its link, shared by
    every worker that uses the same server and ``prefix``.

    The constructor takes a ``redis.asyncio.Redis`` the caller owns (it should not decode
    responses; ``close()`` leaves it open); ``from_url`` builds journals that share one
    client per URL, options and event loop. The schema version is written on first use
    (``migrate`` does it explicitly; ``check`` only reads).
    """

    capabilities: ClassVar[Capabilities] = Capabilities(
        folds_clearing=True,
        starts_eagerly=False,
    )
    _topology: ClassVar[Topology] = ONE_SERVER
    _scripts: ClassVar[dict[str, LuaScript]] = _SCRIPTS
    # Set by ``_setup``, which the constructor and ``from_url`` share: said here.
    prefix: str
    keyring: Keyring
    """The keys that open sealed batches: those of every wrapper using this journal."""
    effects: RedisEffects
    """Tools' external effects (``JournalEffects``)."""
    aside: RedisAside
    """Damaged intents set aside (``JournalAside``)."""
    pages: RedisPages
    """Its listings a page at a time (``JournalPages``)."""
    retention: RedisRetention
    """Pruning what the retention lets go (``JournalRetention``)."""
    sealing: RedisSealing
    """The mark of a sealed journal (``JournalSealing``)."""

    def __init__(
        self,
        client: aioredis.Redis | RedisCluster,
        *,
        prefix: str = DEFAULT_PREFIX,
        where: str | None = None,
        replica_wait: ReplicaWait | None = None,
    ) -> None:
        if client is None:
            raise ConfigurationError(f"a {self._topology.named} needs a client (or use from_url)")
        given: Any = client  # a cluster's client speaks to the journal as a server's does
        address = Redacted.of(where or client_location(given), client_secrets(given))
        self._setup(Connections(given), prefix, address, replica_wait)

    def _setup(
        self,
        connections: Connections[Any],
        prefix: str,
        address: Redacted,
        replica_wait: ReplicaWait | None,
    ) -> None:
        """Build the journal on ``connections``: the client given to the constructor, or the
        one ``from_url`` shares among the journals on its URL."""
        topology = self._topology
        self._layout = topology.layout(prefix)
        self.prefix = prefix
        self.keyring = Keyring()
        self._address = address
        self._link = RedisLink(
            connections,
            self._layout,
            address=address,
            where=f"{topology.named} {address} (prefix {prefix!r})",
            wait=replica_wait,
            scripts=self._scripts,
            on_cluster=topology.on_cluster,
        )
        self._homes = (
            IndexedHomes(self._link, self._layout)
            if self._layout.claims("") is None
            else ClaimedHomes(self._link, self._layout, self._scripts["claim"])
        )
        self.effects = RedisEffects(self._link, self._layout, self.keyring)
        self.aside = RedisAside(self._link, self._layout, self._homes)
        self.pages = RedisPages(self._link, self._layout, self.keyring)
        self.retention = RedisRetention(self._link, self._layout, self._homes)
        self.sealing = RedisSealing(self._link, prefix)
        self._survey = RedisSurvey(self._link, self._layout, prefix)

    @classmethod
    def from_url(cls, url: str, *, prefix: str | None = None, **options: Any) -> Self:
        """A journal on the server at ``url`` (``redis://``, ``rediss://`` or ``unix://``), or,
        called on ``RedisJournal`` itself, on the Redis Cluster at a ``redis+cluster://`` or
        ``rediss+cluster://`` one (a ``RedisClusterJournal``).

        ``prefix`` is the journal's namespace: the key prefix all its keys are under
        (``DEFAULT_PREFIX`` unless given here or as ``?prefix=`` in the URL; given both ways,
        the two must be the same). ``options`` go to ``redis.asyncio.Redis.from_url`` (for
        example ``socket_timeout``); connections are opened on first use. The URL's password
        never appears in messages. ``?replicas=N&replica_timeout=S`` in the query makes each
        write wait for N replicas (``replicas.py``).
        """
        topology = cls._topology
        if is_cluster(url) and not topology.on_cluster:
            if cls is not RedisJournal:
                raise ConfigurationError(
                    f"a {topology.named} is on one server: a redis+cluster:// address is "
                    "opened by RedisClusterJournal.from_url (or RedisJournal.from_url)"
                )
            journal: Any = RedisClusterJournal.from_url(url, prefix=prefix, **options)
            return cast(Self, journal)
        address = Redacted.of(url)
        try:
            url, in_address = split_prefix(url)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{topology.named} URL {address}: {exc}") from None
        chosen = chosen_prefix(in_address, prefix, DEFAULT_PREFIX)
        url, wait = split_wait(url)
        address = Redacted.of(url)
        settings = {**_DEFAULT_OPTIONS, **options, "decode_responses": False}
        try:
            shared = topology.connect(url, settings)
        except (
            ValueError,
            TypeError,
            redis_errors.RedisError,
            redis_errors.RedisClusterException,
        ) as exc:
            detail = address.scrub(str(exc))
            raise ConfigurationError(f"invalid {topology.named} URL {address}: {detail}") from None
        made = cls.__new__(cls)
        made._setup(shared, chosen, Redacted.of(url), wait)
        return made

    @classmethod
    def from_address(cls, address: str, *, namespace: str | None = None) -> Self:
        """The journal the registry opens for ``address``; ``namespace`` is the prefix (the
        address's ``?prefix=`` when None)."""
        return cls.from_url(address, prefix=namespace or None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._address.shown!r}, prefix={self.prefix!r})"

    # -- IntentJournal ------------------------------------------------------------------

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Owner) -> None:
        holder = await self._homes.claim(intent.intent_id, intent.session_id)
        if holder is not None:
            replies.refuse(intent.intent_id, "taken", ["taken"], "record")
        args = _intent_args(intent, state, owner)
        reply = await self._link.script("record", self._layout.scripted(intent.session_id), args)
        word, parts = replies.status(reply, "record")
        if word == "exists" and len(parts) == 2:
            replies.compare(intent, parts[1], self.keyring)
        elif word != "recorded" or len(parts) != 1:
            if word == "taken":
                self._homes.let_go(intent.intent_id, intent.session_id)
            replies.refuse(intent.intent_id, word, reply, "record")
        self._homes.remember(intent.intent_id, intent.session_id)

    async def open_intent(
        self,
        intent: PendingWrite,
        *,
        state: IntentState,
        owner: Owner,
        expect_write_count: int | None = None,
        clearing: str | None = None,
    ) -> Opened:
        holder = await self._homes.claim(intent.intent_id, intent.session_id)
        if holder is not None:
            replies.refuse(intent.intent_id, "taken", ["taken"], "open_intent")
        args = _intent_args(intent, state, owner)
        args.append("" if expect_write_count is None else str(expect_write_count))
        args.append(clearing or "")
        if self._homes.claims_ids:
            args.append("1")  # and say whether ``clearing`` was cleared (its claim goes)
        keys = self._layout.scripted(intent.session_id)
        reply = await self._link.script("open_intent", keys, args)
        reply = await self._homes.opened(intent, clearing, reply)
        opened, home = replies.opened(intent, state, owner, reply, self.keyring)
        if home:
            self._homes.remember(intent.intent_id, intent.session_id)
        return opened

    async def open_by_script(
        self,
        script: str,
        intent: PendingWrite,
        *,
        state: IntentState,
        owner: Owner,
        args: Sequence[str | bytes],
        keys: list[bytes],
        answer: Callable[[object], tuple[_T, bool]],
    ) -> _T:
        """Open ``intent`` with ``script``, one of the journal's scripts that opens an intent as
        ``open_intent.lua`` does and does more in the same step (``open_and_append.lua``: a
        store's append beside it, ``fused.py``): its ARGV ``open_intent``'s for ``intent``,
        ``state`` and ``owner``, then ``args``; its KEYS the session's, then ``keys``.
        ``answer`` reads the reply, and says whether the intent now lives in its session, which
        this object then remembers, as ``open_intent`` does. On one server alone: on a cluster
        an intent id is claimed before it is recorded, which a script cannot do."""
        if self._homes.claims_ids:
            raise ConfigurationError(
                f"{self._link.where}: an intent opened beside other keys in one script needs a "
                "journal on one server (on a Redis Cluster its id is claimed first)"
            )
        argv = _intent_args(intent, state, owner)
        argv += args
        reply = await self._link.script(
            script, self._layout.scripted(intent.session_id) + keys, argv
        )
        found, home = answer(reply)
        if home:
            self._homes.remember(intent.intent_id, intent.session_id)
        return found

    @property
    def replica_wait(self) -> ReplicaWait | None:
        """How many replicas each write waits for, and how long (``replicas.py``); None: none."""
        return self._link.wait

    async def server(self) -> tuple[object, ...] | None:
        """The server and database this journal lives on (``backend.server_of``)."""
        return await self._link.server()

    # -- an operator's look ----------------------------------------------------------------

    async def keys_held(self, *, most: int = 3, budget: int = 10_000) -> list[str]:
        """Up to ``most`` names of keys under this journal's prefix, found by ``SCAN`` over at
        most ``budget`` keys (none: the prefix holds nothing, as far as seen)."""
        return await self._survey.keys_held(most=most, budget=budget)

    async def journal_prefixes(
        self, *, most: int = 20, budget: int = 10_000
    ) -> tuple[list[str], bool]:
        """The prefixes under which the server holds a journal, up to ``most``, sorted, found
        by ``SCAN`` over at most ``budget`` keys; and whether the scan saw every key."""
        return await self._survey.journal_prefixes(most=most, budget=budget)

    # -- the schema ------------------------------------------------------------------------

    async def migrate(self) -> list[str]:
        """Store the schema version if the journal has none; returns the steps applied (none
        when the journal is current). Any other version, newer, older (a layout no release
        wrote) or unreadable, raises ``JournalCorrupt`` and is left as it is."""
        return await self._link.migrate()

    async def check(self) -> str | None:
        """None when the journal's schema is current, else a sentence saying what is missing
        or wrong. Only reads."""
        return await self._link.check()

    async def schema_version(self) -> int | None:
        """The version stored (None when the journal holds none); only reads."""
        return await self._link.schema_version()

    async def transition(
        self,
        intent_id: str,
        *,
        state: IntentState,
        owner: Owner,
        expect_state: IntentState | None = None,
        expect_owner: Owner | None = None,
        expect_fence: int | None = None,
        expect_updated_at: float | None = None,
    ) -> bool:
        async def attempt(session_id: str | None) -> bool | replies.Moved:
            if session_id is None:
                return False
            args: list[str | bytes] = [
                VERSION,
                intent_id,
                session_id,
                state.value,
                str(owner),
                repr(time.time()),
                "0" if expect_state is None else "1",
                "" if expect_state is None else expect_state.value,
                "0" if expect_owner is None else "1",
                "" if expect_owner is None else str(expect_owner),
                "0" if expect_fence is None else "1",
                "" if expect_fence is None else str(expect_fence),
                "0" if expect_updated_at is None else "1",
                "" if expect_updated_at is None else repr(float(expect_updated_at)),
            ]
            reply = await self._link.script("transition", self._layout.scripted(session_id), args)
            if reply == 1 or reply == 0:
                return reply == 1
            return replies.moved(reply, "transition")

        return await self._homes.on_intent(intent_id, attempt)

    async def discard(
        self, intent_id: str, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        held = ["0", "", ""] if owner is None else ["1", str(owner), _token(fence)]

        def lost() -> LeaseLost:
            return LeaseLost(
                f"intent {intent_id} is no longer in flight under {owner}", intent_id=intent_id
            )

        async def attempt(session_id: str | None) -> replies.Moved | None:
            if session_id is None:
                # Held by no session: discarded already (a retry), or settled, which a holder
                # that lost it to another is told (gone is for good: no settled id comes back).
                if owner is not None and await self._homes.settled(intent_id):
                    raise lost()
                return None
            keys = self._layout.scripted(session_id)
            reply = await self._link.script(
                "discard", keys, [VERSION, intent_id, session_id, *held]
            )
            if reply != 1:
                if replies.is_word(reply, "lost"):
                    raise lost()
                return replies.moved(reply, "discard")
            self._homes.forget(intent_id)
            self._homes.let_go(intent_id, session_id)
            return None

        await self._homes.on_intent(intent_id, attempt)
        await self._homes.let_go_when_many()

    async def settle(
        self, decision: Decision, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        require_settling(decision, settling=True)
        intent_id = decision.intent_id
        record = decision.encode()
        deciding = decision.session_id
        bucket = self._layout.of(deciding)
        token = _token(fence)

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
                # Held in another bucket (a cluster's): removed there first (the claim
                # checked), then settled here as an intent no session holds.
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

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        filtered = ["0", ""] if backend is None else ["1", str(backend)]
        if session_id is not None:
            args: list[str | bytes] = [session_id, "all", *filtered]
            keys = self._layout.scripted(session_id)
            reply = await self._link.script("entries", keys, args, read_only=True)
            return self._entries_of(session_id, reply)
        sessions: set[str] = set()
        for found in await self._link.every_bucket("pending", "HVALS", "index"):
            sessions.update(
                replies.text(value, "an intent's session")
                for value in replies.as_list(found, "pending")
            )
        holding = sorted(sessions)
        entries = self._scripts["entries"]
        calls = [
            (entries, self._layout.scripted(session), [session, "all", *filtered])
            for session in holding
        ]
        rows: list[JournalEntry] = []
        for session, reply in zip(
            holding, await self._link.fan_scripts("pending", calls), strict=True
        ):
            rows.extend(self._entries_of(session, reply))
        # Each session's rows are oldest first already; a stable sort merges them.
        rows.sort(key=lambda entry: entry.intent.created_at)
        return rows

    def _entries_of(self, session_id: str, reply: object) -> list[JournalEntry]:
        """A session's rows as ``entries.lua`` answered them, each checked."""
        keyring = self.keyring
        return each(
            replies.rows(reply, "pending"),
            lambda row: replies.entry(session_id, row, keyring),
            lambda row: ("intent", row[0], session_id),
        )

    async def get(self, intent_id: str) -> JournalEntry | None:
        async def attempt(session_id: str | None) -> JournalEntry | Retry | None:
            if session_id is None:
                return None
            keys = self._layout.scripted(session_id)
            args: list[str | bytes] = [session_id, "one", intent_id]
            found = replies.rows(
                await self._link.script("entries", keys, args, read_only=True), "get"
            )
            if not found:
                return Retry.MOVED
            if len(found) != 1 or found[0][0] != intent_id:
                raise replies.unexpected("get", found)
            return replies.entry(session_id, found[0], self.keyring)

        return await self._homes.on_intent(intent_id, attempt)

    async def is_settled(self, intent_id: str) -> bool:
        return await self._homes.settled(intent_id)

    async def write_count(self, session_id: str, backend: BackendIdentity) -> int:
        keys = self._layout.scripted(session_id)
        reply = await self._link.script("write_count", keys, [str(backend)], read_only=True)
        return replies.count(reply, "write_count")

    async def count_write(self, session_id: str, backend: BackendIdentity) -> int:
        keys = self._layout.scripted(session_id)
        reply = await self._link.script("count_write", keys, [VERSION, str(backend)])
        return replies.count(reply, "count_write")

    async def note(self, decision: Decision) -> None:
        require_settling(decision, settling=False)
        keys = self._layout.scripted(decision.session_id)
        args: list[str | bytes] = [VERSION, decision.intent_id, decision.encode()]
        replies.count(await self._link.script("note", keys, args), "note")

    async def note_again(self, previous: Decision, again: Decision) -> bool:
        """Replace the newest decision about ``previous``'s intent with ``again`` (the same
        decision, counted once more), only while it is still ``previous``; whether it was."""
        require_settling(again, settling=False)
        keys = self._layout.scripted(previous.session_id)
        args: list[str | bytes] = [
            VERSION,
            previous.intent_id,
            previous.encode(),
            again.encode(),
        ]
        return replies.count(await self._link.script("note_again", keys, args), "note_again") == 1

    async def decisions(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[Decision]:
        require_limit(limit)
        by_intent = ["0", ""] if intent_id is None else ["1", intent_id]
        buckets = self._layout.buckets()
        if session_id is not None or len(buckets) == 1:
            # Decisions filed under a session are in its bucket: one script.
            bucket = buckets[0] if session_id is None else self._layout.of(session_id)
            keys = list(bucket.globals)
            by_session = session_id is not None and intent_id is None
            if by_session:
                assert session_id is not None
                keys += bucket.session(session_id)
            args: list[str | bytes] = [*by_intent, str(limit), "1" if by_session else "0"]
            reply = await self._link.script("decisions", keys, args, read_only=True)
            return replies.decisions(reply, session_id=session_id, intent_id=intent_id, limit=limit)
        script = self._scripts["decisions"]
        calls = [(script, bucket.globals, [*by_intent, str(limit), "0"]) for bucket in buckets]
        lists = [
            replies.decisions(reply, session_id=None, intent_id=intent_id, limit=limit)
            for reply in await self._link.fan_scripts("decisions", calls)
        ]
        return newest_first(lists, limit)

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        ids = list(dict.fromkeys(intent_ids))
        if not ids:
            return {}
        buckets = self._layout.buckets()
        if len(buckets) == 1:
            reply = await self._link.script(
                "newest_decisions", list(buckets[0].globals), list(ids), read_only=True
            )
            return replies.newest_decisions(reply)
        script = self._scripts["newest_decisions"]
        calls = [(script, bucket.globals, ids) for bucket in buckets]
        newest: dict[str, Decision] = {}
        for reply in await self._link.fan_scripts("newest_decisions", calls):
            for found_id, decision in replies.newest_decisions(reply).items():
                kept = newest.get(found_id)
                if kept is None or decision.decided_at > kept.decided_at:
                    newest[found_id] = decision
        return newest

    async def close(self) -> None:
        """Let the claims that wait go (a cluster's), then release the connections (a client
        passed in stays open); a later operation opens them again."""
        # One left behind only keeps its id from other sessions.
        with contextlib.suppress(JournalUnavailable):
            await self._homes.let_go_now()
        await self._link.close()

    # -- for tests and operators ----------------------------------------------------------

    async def drop(self) -> int:
        """Delete every key of this journal (on every primary of a cluster): its intents,
        decisions, counts and schema version. For tests and operators; returns how many keys
        went.

        Deletes only keys laid out as this journal's, so a journal whose prefix extends this
        one's (``app`` and ``app:x``) keeps its keys."""
        with self._link.translated("drop"):
            client = await self._link.client()
            deleted = await unlink_matching(client, self.prefix, self._layout.owns)
        self._link.schema_checked = False
        self._homes.clear()
        self.effects.forget()
        self.retention.forget()
        return deleted


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


def newest_first(lists: Sequence[list[Decision]], limit: int) -> list[Decision]:
    """The first ``limit`` of several lists of decisions, each newest first, merged by
    ``decided_at`` (the newest head first; the lists' own order kept)."""
    heap: list[tuple[float, int, int]] = [
        (-found[0].decided_at, number, 0) for number, found in enumerate(lists) if found
    ]
    heapq.heapify(heap)
    merged: list[Decision] = []
    while heap and len(merged) < limit:
        _, number, at = heapq.heappop(heap)
        merged.append(lists[number][at])
        if at + 1 < len(lists[number]):
            heapq.heappush(heap, (-lists[number][at + 1].decided_at, number, at + 1))
    return merged


def _token(fence: int | None) -> str:
    return "" if fence is None else str(fence)


def _intent_args(intent: PendingWrite, state: IntentState, owner: Owner) -> list[str | bytes]:
    """``record`` and ``open_intent``'s ARGV (``store_intent`` in ``prelude.lua``)."""
    return [
        VERSION,
        intent.intent_id,
        intent.session_id,
        str(intent.backend),
        state.value,
        str(owner),
        repr(float(intent.created_at)),
        "",  # the update time: the scripts stamp it on the server's clock
        intent.encode(),
    ]
