"""The Redis journal's retention component (``JournalRetention``): the rule of
``_core/retention.py`` over its keys, on a server or a cluster alike.

Every script that raises a count stamps the session's counts with the server's time
(``raise_count`` in ``scripts/prelude.lua``: the field ``layout.STAMP`` of ``{T}:write_count``,
under the session's hash tag); a session without a count reads as the floor (``floor``, the
highest count pruned), and its next write counts one above it.

Each kind is found, then removed by a script that checks the rule again as it removes (a
session counted, an intent opened or a decision replaced since it was found keeps what it
needs), and no script looks at more than a bounded number of rows, so none holds the server
long:

- decisions: walked oldest first along ``log`` (ascending numbers). ``prune_decisions.lua``
  ('find') names the due ones of a stretch with their sessions, which a script cannot derive
  the hash tag of; 'remove' takes them with those sessions' keys and removes each one still
  due from ``decision``, ``log``, its session's ``decisions`` and its intent's ``decided``
  (and the intent from ``settled`` once it has no decision left).
- set-aside entries: few, walked by position in one script (``prune_aside.lua``); a removed
  entry leaves an empty id at its position in ``aside_order``, which numbers the entries.

  Both are one walk (``RedisRetention._walk``): bucket by bucket, by position from the last
  examined on, a stretch of at most ``_STEP`` rows at a time; what differs is the script of a
  stretch and what is done after the walk (a decision's claims let go).
- receipts: ``effect_index`` swept by ``HSCAN``; ``prune_receipts.lua`` removes the done
  effects of a batch, older than the retention by the stamp ``finish_effect`` put on them on
  the server's clock, from every effect key, those of a session with an unresolved intent
  excepted (its batch may hold the output a receipt vouches for).
- counts: the sessions' count hashes swept by ``SCAN``; ``prune_counts.lua``, once per
  session found, removes its counts when it was last counted longer ago than the retention,
  those under a backend with an unresolved intent of the session excepted, and raises the
  floor to the highest, in one step.

Buckets. Each bucket is pruned as a journal of its own would be (its log, its set-aside
entries, its ``effect_index``), with its own keys, so every script touches one slot; on a
cluster, buckets with nothing of a kind are passed over (their sizes read first, at once). The
sessions' counts are swept by ``SCAN`` on every primary in turn (a primary's keyspace holds its
buckets' keys), each session's counts pruned with its bucket's global keys: the floor a pruned
count raises is its bucket's, in the same step, the one every session of the bucket reads, so a
session's count never goes down. Then every bucket's floor is raised to the highest
(``scripts/even_floor.lua``), so that once a prune returns, a session never counted reads at
least every count pruned, in whichever bucket, as on one server. On a cluster an intent whose
last decision was pruned is no longer settled, and its claim goes (``homes.ClaimedHomes``).

With a ``limit``, each walk resumes where this object's last call stopped (a bucket and a
position in it; for counts, a primary and its cursor, begun again when the primaries changed:
positions and cursors kept in memory, so another object, or this one after ``drop``, begins at
the oldest), in rounds: a kind whose walk reached its end examines nothing more until every
kind has reached its own, and the call that ends the round answers ``done``, so that repeated
calls end however differently the kinds are sized. Without one every walk goes from the oldest
to the end. A dry run moves none. A session's counts (all its backends) are examined as one
row.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from ..._core.retention import Pruned, Retention
from ..journal import require_limit
from ..lua import LuaScript
from . import replies
from .homes import IndexedHomes
from .layout import (
    ASIDE_KEYS,
    EFFECT_INDEX,
    EFFECT_KEYS,
    INTENTS,
    SESSION_KEYS,
    JournalKeys,
    KeyLayout,
)
from .link import VERSION, RedisLink
from .pages import by_session

__all__ = ["RETENTION_SCRIPTS", "RedisRetention", "receipt_keys"]

RETENTION_SCRIPTS: Final = (
    "count_write",
    "prune_aside",
    "prune_counts",
    "prune_decisions",
    "prune_receipts",
    "write_count",
)
"""The scripts of the journal's counts and of pruning (``scripts/<name>.lua``), for the
journal's runner."""
_EVEN_FLOOR: Final = LuaScript("agents_reconcile._backends.redis", "scripts", "even_floor")
_STEP: Final = 500
"""Rows one script examines at most."""
_SCAN_STEP: Final = 1000
"""The ``COUNT`` of each ``SCAN`` and ``HSCAN`` of a sweep."""
_EFFECT_AT: Final = -len(EFFECT_KEYS)
"""Where a session's own keys begin in ``JournalKeys.effects``."""
_INTENTS_AT: Final = SESSION_KEYS.index(INTENTS)
"""Where a session's unresolved intents are in ``JournalKeys.session``."""


@dataclass
class Sweep:
    """Where a ``SCAN`` or ``HSCAN`` sweep stands: the cursor of its next call, whether it
    began, and what it found that is not examined yet."""

    cursor: int = 0
    begun: bool = False
    found: list[bytes] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        return self.begun and self.cursor == 0 and not self.found

    def copy(self) -> Sweep:
        return Sweep(self.cursor, self.begun, list(self.found))


@dataclass
class Walk:
    """Where a walk of buckets stands: the bucket, and the last position examined in it (the
    number of a decision, or of a set-aside entry; 0: none)."""

    bucket: int = 0
    after: int = 0


@dataclass
class BucketSweep:
    """Where an ``HSCAN`` sweep of buckets stands: the bucket, and its sweep."""

    bucket: int = 0
    sweep: Sweep = field(default_factory=Sweep)

    def copy(self) -> BucketSweep:
        return BucketSweep(self.bucket, self.sweep.copy())


@dataclass
class NodeSweep:
    """Where a ``SCAN`` sweep of the primaries stands: their names when it began, which one it
    is on, and that one's sweep."""

    nodes: tuple[str, ...] = ()
    at: int = 0
    sweep: Sweep = field(default_factory=Sweep)

    def copy(self) -> NodeSweep:
        return NodeSweep(self.nodes, self.at, self.sweep.copy())


@dataclass
class Walks:
    """Where this object's last ``prune`` with a limit stopped, for the next."""

    decisions: Walk = field(default_factory=Walk)
    aside: Walk = field(default_factory=Walk)
    receipts: BucketSweep = field(default_factory=BucketSweep)
    counts: NodeSweep = field(default_factory=NodeSweep)
    ended: set[str] = field(default_factory=set)
    """The kinds whose walk reached its end in this round."""


@dataclass(frozen=True)
class _Kind:
    """What pruning one kind came to: rows removed, their bytes, and whether it went to the
    end of what there is to examine."""

    removed: int = 0
    size: int = 0
    done: bool = True


@dataclass(frozen=True)
class _Examined:
    """What one script of a walk by position did: the last position it examined (0: none),
    whether the bucket goes on after it, how many rows it examined, and what it removed (or, in
    a dry run, would remove) and their bytes."""

    last: int
    more: bool
    examined: int
    removed: int
    size: int


_Stretch = Callable[[JournalKeys, int, int], Awaitable[_Examined]]
"""One stretch of a walk by position: given a bucket, the last position examined and how many
rows to examine at most, what it did there."""


class RedisRetention:
    """``JournalRetention`` through a journal's link, over its layout (one bucket or many); the
    claims of intents whose last decision goes are let go through ``homes``."""

    def __init__(self, link: RedisLink, layout: KeyLayout, homes: IndexedHomes) -> None:
        self._link = link
        self._layout = layout
        self._homes = homes
        self._walks = Walks()

    def forget(self) -> None:
        """Forget where the last limited ``prune`` stopped (the journal was dropped)."""
        self._walks = Walks()

    async def prune(
        self, retention: Retention, *, limit: int | None = None, dry_run: bool = False
    ) -> Pruned:
        if limit is not None:
            require_limit(limit)
        decided = retention.seconds("decisions")
        stored = retention.seconds("receipts")
        idle = retention.seconds("idle_sessions")
        kinds: list[_Kind] = []
        for name, seconds, prune_kind in (
            ("decisions", decided, self._prune_decisions),
            ("aside", decided, self._prune_aside),
            ("receipts", stored, self._prune_receipts),
            ("counts", idle, self._prune_counts),
        ):
            if seconds is None or (limit is not None and name in self._walks.ended):
                kinds.append(_Kind())
                continue
            found = await prune_kind(seconds, limit, dry_run)
            if limit is not None and found.done and not dry_run:
                self._walks.ended.add(name)
            kinds.append(found)
        decisions, aside, receipts, counts = kinds
        pruned = Pruned(
            decisions=decisions.removed,
            set_aside=aside.removed,
            receipts=receipts.removed,
            write_counts=counts.removed,
            bytes=sum(kind.size for kind in kinds),
            done=all(kind.done for kind in kinds),
        )
        if not dry_run and (pruned.done or limit is None):
            # The round ends once every kind reached its end.
            self._walks.ended.clear()
        return pruned

    async def _holding(self, command: str, key: str) -> list[int]:
        """The buckets whose ``key`` holds something (``command`` its size: LLEN, HLEN); on one
        server, its one bucket, unasked."""
        if len(self._layout.buckets()) == 1:
            return [0]
        sizes = await self._link.every_bucket("prune", command, key)
        return [number for number, size in enumerate(sizes) if size]

    # -- decisions and set-aside entries: walks by number, bucket by bucket -----------------

    async def _walk(
        self, holding: tuple[str, str], start: Walk, limit: int | None, stretch: _Stretch
    ) -> tuple[_Kind, Walk]:
        """Walk the buckets whose ``holding`` (a size command and key) is not empty, from
        ``start`` (the beginning without a limit), each by position from the last examined on,
        one ``stretch`` at a time (at most ``_STEP`` rows, and what is left of ``limit``),
        until the walk reached its end or ``limit`` rows were examined. What the stretches
        came to, and where the next limited walk begins (its beginning once this one ended)."""
        walk = Walk() if limit is None else replace(start)
        examined = removed = size = 0
        ended = True
        for number in await self._holding(*holding):
            if number < walk.bucket:
                continue
            if limit is not None and examined >= limit:
                ended = False
                break
            if number > walk.bucket:
                walk = Walk(number)
            bucket = self._layout.bucket(number)
            more = True
            while more and (limit is None or examined < limit):
                step = _STEP if limit is None else min(_STEP, limit - examined)
                found = await stretch(bucket, walk.after, step)
                examined += found.examined
                removed, size = removed + found.removed, size + found.size
                walk.after, more = found.last or walk.after, found.more
            if more:
                ended = False
                break
            walk = Walk(number + 1)
        return _Kind(removed, size, ended), Walk() if ended else walk

    async def _prune_decisions(self, seconds: float, limit: int | None, dry_run: bool) -> _Kind:
        async def stretch(bucket: JournalKeys, after: int, step: int) -> _Examined:
            args: list[str | bytes] = [VERSION, "find", repr(seconds), str(after), str(step)]
            reply = await self._link.script("prune_decisions", list(bucket.globals), args)
            last, more, due, seen = _found_decisions(reply)
            if dry_run:
                removed, size = len(due), sum(found[3] for found in due)
            elif due:
                removed, size = await self._remove_decisions(bucket, seconds, due)
            else:
                removed = size = 0
            return _Examined(last, more, seen, removed, size)

        found, stopped = await self._walk(("LLEN", "log"), self._walks.decisions, limit, stretch)
        if not dry_run:
            self._walks.decisions = stopped
            await self._homes.let_go_now()
        return found

    async def _remove_decisions(
        self, bucket: JournalKeys, seconds: float, due: list[tuple[str, str, str, int]]
    ) -> tuple[int, int]:
        groups = by_session(
            sorted(((session, number) for number, session, _, _ in due), key=lambda pair: pair[0])
        )
        keys = list(bucket.globals)
        args: list[str | bytes] = [VERSION, "remove", repr(seconds), str(len(groups))]
        for session, numbers in groups:
            keys += bucket.session(session)
            args += [session, str(len(numbers)), *numbers]
        found = _removed(await self._link.script("prune_decisions", keys, args), "prune_decisions")
        # An intent left without a decision is settled no more: its claim goes with it.
        await self._homes.let_go_unsettled(
            bucket, sorted({(intent, session) for _, session, intent, _ in due})
        )
        return found

    async def _prune_aside(self, seconds: float, limit: int | None, dry_run: bool) -> _Kind:
        async def stretch(bucket: JournalKeys, after: int, step: int) -> _Examined:
            keys = [*bucket.globals, *(bucket.names[name].encode() for name in ASIDE_KEYS)]
            args: list[str | bytes] = [
                VERSION,
                repr(seconds),
                str(after),
                str(step),
                "1" if dry_run else "0",
            ]
            parts = replies.as_list(
                await self._link.script("prune_aside", keys, args), "prune_aside"
            )
            if len(parts) != 5:
                raise replies.unexpected("prune_aside", parts)
            last, ending, removed, size, seen = (
                replies.count(part, "prune_aside") for part in parts
            )
            return _Examined(last, ending == 1, seen, removed, size)

        found, stopped = await self._walk(("HLEN", "aside"), self._walks.aside, limit, stretch)
        if not dry_run:
            self._walks.aside = stopped
        return found

    # -- receipts and counts: sweeps -------------------------------------------------------

    async def _prune_receipts(self, seconds: float, limit: int | None, dry_run: bool) -> _Kind:
        state = BucketSweep() if limit is None else self._walks.receipts.copy()
        removed = size = examined = 0
        ended = True
        for number in await self._holding("HLEN", EFFECT_INDEX):
            if number < state.bucket:
                continue
            if limit is not None and examined >= limit:
                ended = False
                break
            if number > state.bucket:
                state = BucketSweep(number)
            bucket = self._layout.bucket(number)
            index = bucket.names[EFFECT_INDEX]

            async def hscan(cursor: int, index: str = index) -> tuple[int, list[bytes]]:
                reply = await self._link.fan(
                    "prune", [("HSCAN", index, cursor, "COUNT", _SCAN_STEP)]
                )
                return _scanned(reply[0], "HSCAN")

            while limit is None or examined < limit:
                # An HSCAN answers keys and sessions in turn: two items a row.
                step = _STEP if limit is None else min(_STEP, limit - examined)
                found = await _next(state.sweep, 2 * step, hscan)
                if not found:
                    break
                examined += len(found) // 2
                gone, freed = await self._remove_receipts(bucket, seconds, dry_run, found)
                removed, size = removed + gone, size + freed
            if not state.sweep.ended:
                ended = False
                break
            state = BucketSweep(number + 1)
        if not dry_run:
            self._walks.receipts = BucketSweep() if ended else state
        return _Kind(removed, size, ended)

    async def _remove_receipts(
        self, bucket: JournalKeys, seconds: float, dry_run: bool, found: list[bytes]
    ) -> tuple[int, int]:
        pairs = [
            (
                replies.text(found[at + 1], "an effect's session"),
                replies.text(found[at], "an effect key"),
            )
            for at in range(0, len(found) - 1, 2)
        ]
        groups = by_session(sorted(pairs))
        keys = bucket.effects(groups[0][0])[:_EFFECT_AT]
        args: list[str | bytes] = [
            VERSION,
            repr(seconds),
            "1" if dry_run else "0",
            str(len(groups)),
        ]
        for session, effect_keys in groups:
            keys += receipt_keys(bucket, session)
            args += [session, str(len(effect_keys)), *effect_keys]
        return _removed(await self._link.script("prune_receipts", keys, args), "receipts")

    async def _prune_counts(self, seconds: float, limit: int | None, dry_run: bool) -> _Kind:
        layout = self._layout
        primaries = await self._link.primaries()
        names = tuple(name for name, _ in primaries)
        state = NodeSweep(names) if limit is None else self._walks.counts.copy()
        if state.nodes != names:
            state = NodeSweep(names)
        pattern = layout.counts_pattern()
        removed = size = examined = 0
        while state.at < len(primaries) and (limit is None or examined < limit):
            node = primaries[state.at][1]

            async def scanned(cursor: int, node: Any = node) -> tuple[int, list[bytes]]:
                following, keys = await self._link.scan_from(node, cursor, pattern, _SCAN_STEP)
                return following, [key for key in keys if layout.tagged(key) is not None]

            step = _STEP if limit is None else min(_STEP, limit - examined)
            found = await _next(state.sweep, step, scanned)
            examined += len(found)
            for counts in found:
                session = layout.tagged(counts)
                number = layout.bucket_of_key(counts)
                assert session is not None and number is not None
                keys = [*layout.bucket(number).globals, *session]
                args: list[str | bytes] = [
                    VERSION,
                    repr(seconds),
                    "1" if dry_run else "0",
                ]
                gone, freed = _removed(
                    await self._link.script("prune_counts", keys, args), "counts"
                )
                removed, size = removed + gone, size + freed
            if state.sweep.ended:
                state = NodeSweep(names, state.at + 1)
        ended = state.at >= len(primaries)
        if not dry_run:
            self._walks.counts = NodeSweep() if ended else state
            await self._even_floors()
        return _Kind(removed, size, ended)

    async def _even_floors(self) -> None:
        """Raise every bucket's floor to the highest of them: a session without a count reads
        its bucket's floor (so its count never goes down, whatever happens meanwhile), and
        after a prune, every count pruned anywhere, as on one server (which has one floor)."""
        buckets = self._layout.buckets()
        if len(buckets) == 1:
            return
        floors = [bucket.names["floor"] for bucket in buckets]
        found = [
            int(value or 0)
            for value in await self._link.fan("prune", [("GET", key) for key in floors])
        ]
        highest = max(found, default=0)
        calls = [
            (_EVEN_FLOOR, [key.encode()], [str(highest)])
            for key, value in zip(floors, found, strict=True)
            if value < highest
        ]
        await self._link.fan_scripts("prune", calls)


def receipt_keys(layout: JournalKeys, session_id: str) -> list[bytes]:
    """A session's keys as ``prune_receipts.lua`` takes them: its effect keys, then its
    unresolved intents (``intents``: a receipt of a session with one stays)."""
    return [*layout.effects(session_id)[_EFFECT_AT:], layout.session(session_id)[_INTENTS_AT]]


async def _next(
    sweep: Sweep, most: int, scan: Callable[[int], Awaitable[tuple[int, list[bytes]]]]
) -> list[bytes]:
    """Up to ``most`` items the sweep found and has not handed out, scanning on while it has
    fewer and has not ended; none once it ended."""
    while len(sweep.found) < most and not (sweep.begun and sweep.cursor == 0):
        sweep.cursor, found = await scan(sweep.cursor)
        sweep.begun = True
        sweep.found += found
    taken, sweep.found = sweep.found[:most], sweep.found[most:]
    return taken


def _scanned(reply: object, operation: str) -> tuple[int, list[bytes]]:
    """A ``SCAN`` or ``HSCAN`` reply (as the client reads it: a pair, the fields and values of
    an ``HSCAN`` as a mapping or in turn) as its next cursor and the items, fields and values
    in turn."""
    if not isinstance(reply, list | tuple) or len(reply) != 2:
        raise replies.unexpected(operation, reply)
    cursor, found = reply
    if isinstance(found, dict):
        found = [part for pair in found.items() for part in pair]
    elif isinstance(found, tuple):
        found = list(found)
    items = replies.as_list(found, operation)
    return replies.count(cursor, operation), [replies.blob(item, "a key") for item in items]


def _found_decisions(reply: object) -> tuple[int, bool, list[tuple[str, str, str, int]], int]:
    """``prune_decisions.lua``'s 'find' reply: the last number examined (0: none), whether the
    log goes on after it, the due decisions (number, session, intent, bytes), and how many
    were examined."""
    parts = replies.as_list(reply, "prune_decisions")
    if len(parts) != 4:
        raise replies.unexpected("prune_decisions", reply)
    due: list[tuple[str, str, str, int]] = []
    for row in replies.as_list(parts[2], "prune_decisions"):
        fields = replies.as_list(row, "prune_decisions")
        if len(fields) != 4:
            raise replies.unexpected("prune_decisions", row)
        due.append(
            (
                replies.text(fields[0], "a decision's number"),
                replies.blob(fields[1], "a session id").decode("utf-8", "surrogatepass"),
                replies.blob(fields[2], "an intent id").decode("utf-8", "surrogatepass"),
                replies.count(fields[3], "prune_decisions"),
            )
        )
    last = replies.count(parts[0], "prune_decisions")
    more = replies.count(parts[1], "prune_decisions") == 1
    return last, more, due, replies.count(parts[3], "prune_decisions")


def _removed(reply: object, operation: str) -> tuple[int, int]:
    """A removing script's {removed, bytes} reply."""
    parts = replies.as_list(reply, operation)
    if len(parts) != 2:
        raise replies.unexpected(operation, reply)
    return replies.count(parts[0], operation), replies.count(parts[1], operation)
