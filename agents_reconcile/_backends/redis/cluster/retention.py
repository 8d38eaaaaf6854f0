"""Pruning the cluster journal: the rule and the scripts of ``retention.py``, bucket by bucket.

Each bucket is pruned as a journal of its own would be (its log, its set-aside entries, its
``effect_index``), with its own keys, so every script touches one slot. Buckets with nothing of
a kind are skipped (their sizes read first, at once). The sessions' counts are swept by ``SCAN``
on every primary in turn (a primary's keyspace holds its buckets' keys), each session's counts
pruned with its bucket's global keys: the floor a pruned count raises is its bucket's, in the
same step, the one every session of the bucket reads, so a session's count never goes down.
Then every bucket's floor is raised to the highest (``scripts/even_floor.lua``), so that once
a prune returns, a session never counted reads at least every count pruned, in whichever bucket,
as on one server. A cluster journal was never of layout 1: every count carries its stamp.

With a ``limit``, each walk resumes where this object's last call stopped (a bucket and a
position in it; for counts, a primary and its cursor, begun again when the primaries changed),
in rounds: a kind whose walk reached its end examines nothing more until every kind has reached
its own, so that repeated calls end (``done``) however differently the kinds are sized.
An intent whose last decision was pruned is no longer settled, and its claim goes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from ...lua import LuaScript
from .. import replies
from ..homes import IndexedHomes
from ..layout import ASIDE_KEYS
from ..link import VERSION, RedisLink
from ..nodes import ClusterNode, each_primary, scan
from ..pages import by_session
from ..retention import (
    _EFFECT_AT,
    _SCAN_STEP,
    _STEP,
    Sweep,
    _found_decisions,
    _Kind,
    _next,
    _removed,
    _scanned,
    receipt_keys,
)
from .layout import BucketKeys

if TYPE_CHECKING:
    from ..layout import JournalKeys

__all__ = ["ClusterRetention", "ClusterWalks"]

_EVEN_FLOOR: Final = LuaScript("agents_reconcile._backends.redis", "scripts", "even_floor")


@dataclass
class Walk:
    """Where a walk of buckets stands: the bucket, and the last position examined in it."""

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
class ClusterWalks:
    """Where this journal object's last ``prune`` with a limit stopped, for the next."""

    decisions: Walk = field(default_factory=Walk)
    aside: Walk = field(default_factory=Walk)
    receipts: BucketSweep = field(default_factory=BucketSweep)
    counts: NodeSweep = field(default_factory=NodeSweep)
    ended: set[str] = field(default_factory=set)
    """The kinds whose walk reached its end in this round."""


class ClusterRetention:
    """The four kinds of ``prune`` for ``RedisClusterJournal``, which provides what is declared
    here (``RedisRetention.prune`` calls these)."""

    _link: RedisLink
    _homes: IndexedHomes
    _layout: BucketKeys
    _cluster_walks: ClusterWalks

    def _waiting(self, kind: str, limit: int | None) -> bool:
        """Whether ``kind`` reached its end in this round of limited prunes."""
        return limit is not None and kind in self._cluster_walks.ended

    def _ended(self, kind: str, limit: int | None, dry_run: bool, done: bool) -> None:
        if limit is not None and done and not dry_run:
            self._cluster_walks.ended.add(kind)

    def _round(self, limit: int | None, dry_run: bool, done: bool) -> None:
        """After a prune: a round ends once every kind reached its end."""
        if not dry_run and (done or limit is None):
            self._cluster_walks.ended.clear()

    async def _holding(self, command: str, key: str) -> list[int]:
        """The buckets whose ``key`` holds something (``command`` its size: LLEN, HLEN)."""
        sizes = await self._link.every_bucket("prune", command, key)
        return [number for number, size in enumerate(sizes) if size]

    # -- decisions and set-aside entries: walks by number, bucket by bucket -----------------

    async def _prune_decisions(self, seconds: float, limit: int | None, dry_run: bool) -> _Kind:
        if self._waiting("decisions", limit):
            return _Kind()
        walk = Walk() if limit is None else replace(self._cluster_walks.decisions)
        examined = removed = size = 0
        for number in await self._holding("LLEN", "log"):
            if number < walk.bucket or (limit is not None and examined >= limit):
                continue
            if number > walk.bucket:
                walk = Walk(number)
            bucket = self._layout.bucket(number)
            more = True
            while more and (limit is None or examined < limit):
                step = _STEP if limit is None else min(_STEP, limit - examined)
                args: list[str | bytes] = [
                    VERSION,
                    "find",
                    repr(seconds),
                    str(walk.after),
                    str(step),
                ]
                reply = await self._link.script("prune_decisions", list(bucket.globals), args)
                last, more, due, seen = _found_decisions(reply)
                examined += seen
                walk.after = last or walk.after
                if dry_run:
                    removed += len(due)
                    size += sum(found[3] for found in due)
                elif due:
                    gone, freed = await self._remove_bucket_decisions(bucket, seconds, due)
                    removed, size = removed + gone, size + freed
            if not more:
                walk = Walk(number + 1)
        done = limit is None or examined < limit
        if not dry_run:
            self._cluster_walks.decisions = Walk() if done else walk
            await self._homes.let_go_now()
        self._ended("decisions", limit, dry_run, done)
        return _Kind(removed, size, done)

    async def _remove_bucket_decisions(
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
        intents = sorted({(intent, session) for _, session, intent, _ in due})
        names = bucket.names
        checks = [
            command
            for intent, _ in intents
            for command in (
                ("SISMEMBER", names["settled"], intent),
                ("HEXISTS", names["index"], intent),
            )
        ]
        flags = await self._link.fan("prune", checks)
        for at, (intent, session) in enumerate(intents):
            if flags[2 * at] == 0 and flags[2 * at + 1] == 0:
                self._homes.let_go(intent, session)
        return found

    async def _prune_aside(self, seconds: float, limit: int | None, dry_run: bool) -> _Kind:
        if self._waiting("aside", limit):
            return _Kind()
        walk = Walk() if limit is None else replace(self._cluster_walks.aside)
        examined = removed = size = 0
        for number in await self._holding("HLEN", "aside"):
            if number < walk.bucket or (limit is not None and examined >= limit):
                continue
            if number > walk.bucket:
                walk = Walk(number)
            bucket = self._layout.bucket(number)
            keys = [*bucket.globals, *(bucket.names[name].encode() for name in ASIDE_KEYS)]
            more = True
            while more and (limit is None or examined < limit):
                step = _STEP if limit is None else min(_STEP, limit - examined)
                args: list[str | bytes] = [
                    VERSION,
                    repr(seconds),
                    str(walk.after),
                    str(step),
                    "1" if dry_run else "0",
                ]
                reply = await self._link.script("prune_aside", keys, args)
                parts = replies.as_list(reply, "prune_aside")
                if len(parts) != 5:
                    raise replies.unexpected("prune_aside", parts)
                last, ending, gone, freed, seen = (
                    replies.count(part, "prune_aside") for part in parts
                )
                examined, removed, size = examined + seen, removed + gone, size + freed
                walk.after, more = last or walk.after, ending == 1
            if not more:
                walk = Walk(number + 1)
        done = limit is None or examined < limit
        if not dry_run:
            self._cluster_walks.aside = Walk() if done else walk
        self._ended("aside", limit, dry_run, done)
        return _Kind(removed, size, done)

    # -- receipts and counts: sweeps -------------------------------------------------------

    async def _prune_receipts(self, seconds: float, limit: int | None, dry_run: bool) -> _Kind:
        if self._waiting("receipts", limit):
            return _Kind()
        state = BucketSweep() if limit is None else self._cluster_walks.receipts.copy()
        removed = size = examined = 0
        for number in await self._holding("HLEN", "effect_index"):
            if number < state.bucket or (limit is not None and examined >= limit):
                continue
            if number > state.bucket:
                state = BucketSweep(number)
            bucket = self._layout.bucket(number)
            index = bucket.names["effect_index"]

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
                gone, freed = await self._remove_bucket_receipts(bucket, seconds, dry_run, found)
                removed, size = removed + gone, size + freed
            if state.sweep.ended:
                state = BucketSweep(number + 1)
        done = limit is None or examined < limit
        if not dry_run:
            self._cluster_walks.receipts = BucketSweep() if done else state
        self._ended("receipts", limit, dry_run, done)
        return _Kind(removed, size, done)

    async def _remove_bucket_receipts(
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
        if self._waiting("counts", limit):
            return _Kind()
        with self._link.translated("prune"):
            client = await self._link.client()
            primaries = await each_primary(client)
        names = tuple(str(node.name) for node in primaries)
        state = NodeSweep(names) if limit is None else self._cluster_walks.counts.copy()
        if state.nodes != names:
            state = NodeSweep(names)
        pattern = self._layout.counts_pattern()
        args: list[str | bytes] = [VERSION, repr(seconds), "", "1" if dry_run else "0"]
        removed = size = examined = 0
        while state.at < len(primaries) and (limit is None or examined < limit):
            node = primaries[state.at]

            async def scanned(cursor: int, node: ClusterNode = node) -> tuple[int, list[bytes]]:
                with self._link.translated("prune"):
                    following, keys = await scan(client, node, cursor, pattern, _SCAN_STEP)
                return following, [key for key in keys if self._layout.tagged(key) is not None]

            step = _STEP if limit is None else min(_STEP, limit - examined)
            found = await _next(state.sweep, step, scanned)
            examined += len(found)
            for counts in found:
                session = self._layout.tagged(counts)
                number = self._layout.bucket_of_key(counts)
                assert session is not None and number is not None
                keys = [*self._layout.bucket(number).globals, *session]
                gone, freed = _removed(
                    await self._link.script("prune_counts", keys, args), "counts"
                )
                removed, size = removed + gone, size + freed
            if state.sweep.ended:
                state = NodeSweep(names, state.at + 1)
        done = state.at >= len(primaries)
        if not dry_run:
            self._cluster_walks.counts = NodeSweep() if done else state
            await self._even_floors()
        self._ended("counts", limit, dry_run, done)
        return _Kind(removed, size, done)

    async def _even_floors(self) -> None:
        """Raise every bucket's floor to the highest of them: a session without a count reads
        its bucket's floor (so its count never goes down, whatever happens meanwhile), and
        after a prune, every count pruned anywhere, as on one server."""
        floors = [bucket.names["floor"] for bucket in self._layout.buckets()]
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
