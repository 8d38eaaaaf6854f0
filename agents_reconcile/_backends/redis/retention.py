"""Pruning the Redis journal (``PruningJournal``): the rule of ``_core/retention.py`` over its
keys, and the write counts that read as the journal's floor once pruned.

Every script that raises a count stamps the session's counts with the server's time
(``raise_count`` in ``scripts/prelude.lua``: the field ``layout.STAMP`` of ``{T}:write_count``,
under the session's hash tag); a session without a count reads as the floor (``floor``, the
highest count pruned), and its next write counts one above it. Counts from before layout 2
carry no stamp: the time of the upgrade (``upgraded``) stands for it.

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
- receipts: ``effect_index`` swept by ``HSCAN``; ``prune_receipts.lua`` removes the done
  effects of a batch, older than the retention by the stamp ``finish_effect`` put on them on
  the server's clock, from every effect key, those of a session with an unresolved intent
  excepted (its batch may hold the output a receipt vouches for).
- counts: the sessions' count hashes swept by ``SCAN``; ``prune_counts.lua``, once per
  session found, removes its counts when it was last counted longer ago than the retention,
  those under a backend with an unresolved intent of the session excepted, and raises the
  floor to the highest, in one step.

With a ``limit``, a walk or sweep resumes where this object's last call stopped (positions and
cursors kept in memory: another object, or this one after ``drop``, begins at the oldest) and
wraps around at the end; without one it goes from the oldest to the end. A dry run moves
neither. A session's counts (all its backends) are examined as one row.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from ..._core.records import BackendIdentity
from ..._core.retention import Pruned, Retention
from ..journal import require_limit
from . import replies
from .layout import ASIDE_KEYS, EFFECT_INDEX, EFFECT_KEYS, SESSION_KEYS, UPGRADED, JournalKeys
from .link import VERSION, RedisLink
from .pages import by_session

__all__ = ["RETENTION_SCRIPTS", "RedisRetention", "Walks", "receipt_keys"]

RETENTION_SCRIPTS: Final = (
    "count_write",
    "prune_aside",
    "prune_counts",
    "prune_decisions",
    "prune_receipts",
    "write_count",
)
"""The scripts this half runs (``scripts/<name>.lua``), for the journal's runner."""
_STEP: Final = 500
"""Rows one script examines at most."""
_SCAN_STEP: Final = 1000
"""The ``COUNT`` of each ``SCAN`` and ``HSCAN`` of a sweep."""
_EFFECT_AT: Final = -len(EFFECT_KEYS)
"""Where a session's own keys begin in ``JournalKeys.effects``."""
_OPEN_AT: Final = SESSION_KEYS.index("open")
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
class Walks:
    """Where this journal object's last ``prune`` with a limit stopped, for the next."""

    decisions: int = 0
    """The number of the last decision examined (0: none)."""
    aside: int = 0
    """The position of the last set-aside entry examined (0: none)."""
    receipts: Sweep = field(default_factory=Sweep)
    counts: Sweep = field(default_factory=Sweep)


@dataclass(frozen=True)
class _Kind:
    """What pruning one kind came to: rows removed, their bytes, and whether it went to the
    end of what there is to examine."""

    removed: int = 0
    size: int = 0
    done: bool = True


class RedisRetention:
    """Write counts read as the floor once pruned, and ``prune``, for ``RedisJournal``, which
    provides what is declared here."""

    _link: RedisLink
    _layout: JournalKeys
    _walks: Walks

    async def write_count(self, session_id: str, backend: BackendIdentity) -> int:
        keys = self._layout.scripted(session_id)
        reply = await self._link.script("write_count", keys, [str(backend)], read_only=True)
        return replies.count(reply, "write_count")

    async def count_write(self, session_id: str, backend: BackendIdentity) -> int:
        keys = self._layout.scripted(session_id)
        reply = await self._link.script("count_write", keys, [VERSION, str(backend)])
        return replies.count(reply, "count_write")

    async def prune(
        self, retention: Retention, *, limit: int | None = None, dry_run: bool = False
    ) -> Pruned:
        if limit is not None:
            require_limit(limit)
        decided = retention.seconds("decisions")
        stored = retention.seconds("receipts")
        idle = retention.seconds("idle_sessions")
        kinds: list[_Kind] = []
        for seconds, prune_kind in (
            (decided, self._prune_decisions),
            (decided, self._prune_aside),
            (stored, self._prune_receipts),
            (idle, self._prune_counts),
        ):
            kinds.append(_Kind() if seconds is None else await prune_kind(seconds, limit, dry_run))
        decisions, aside, receipts, counts = kinds
        return Pruned(
            decisions=decisions.removed,
            set_aside=aside.removed,
            receipts=receipts.removed,
            write_counts=counts.removed,
            bytes=sum(kind.size for kind in kinds),
            done=all(kind.done for kind in kinds),
        )

    # -- decisions and set-aside entries: walks by number ----------------------------------

    async def _prune_decisions(self, seconds: float, limit: int | None, dry_run: bool) -> _Kind:
        after = 0 if limit is None else self._walks.decisions
        examined = removed = size = 0
        more = True
        while more and (limit is None or examined < limit):
            step = _STEP if limit is None else min(_STEP, limit - examined)
            args: list[str | bytes] = [
                VERSION,
                "find",
                repr(seconds),
                str(after),
                str(step),
            ]
            reply = await self._link.script("prune_decisions", list(self._layout.globals), args)
            last, more, due, seen = _found_decisions(reply)
            examined += seen
            after = last or after
            if dry_run:
                removed += len(due)
                size += sum(found[3] for found in due)
            elif due:
                gone, freed = await self._remove_decisions(seconds, due)
                removed, size = removed + gone, size + freed
        if not dry_run:
            self._walks.decisions = after if more else 0
        return _Kind(removed, size, not more)

    async def _remove_decisions(
        self, seconds: float, due: list[tuple[str, str, str, int]]
    ) -> tuple[int, int]:
        groups = by_session(
            sorted(((session, number) for number, session, _, _ in due), key=lambda pair: pair[0])
        )
        keys = list(self._layout.globals)
        args: list[str | bytes] = [VERSION, "remove", repr(seconds), str(len(groups))]
        for session, numbers in groups:
            keys += self._layout.session(session)
            args += [session, str(len(numbers)), *numbers]
        return _removed(await self._link.script("prune_decisions", keys, args), "prune_decisions")

    async def _prune_aside(self, seconds: float, limit: int | None, dry_run: bool) -> _Kind:
        after = 0 if limit is None else self._walks.aside
        keys = [
            *self._layout.globals,
            *(self._layout.names[name].encode() for name in ASIDE_KEYS),
        ]
        examined = removed = size = 0
        more = True
        while more and (limit is None or examined < limit):
            step = _STEP if limit is None else min(_STEP, limit - examined)
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
            last, ending, gone, freed, seen = (replies.count(part, "prune_aside") for part in parts)
            examined, removed, size = examined + seen, removed + gone, size + freed
            after, more = last or after, ending == 1
        if not dry_run:
            self._walks.aside = after if more else 0
        return _Kind(removed, size, not more)

    # -- receipts and counts: sweeps ------------------------------------------------------

    async def _prune_receipts(self, seconds: float, limit: int | None, dry_run: bool) -> _Kind:
        index = self._layout.names[EFFECT_INDEX]

        async def scan(cursor: int) -> tuple[int, list[bytes]]:
            reply = await self._link.command("prune", "HSCAN", index, cursor, "COUNT", _SCAN_STEP)
            return _scanned(reply, "HSCAN")

        sweep = Sweep() if limit is None else self._walks.receipts.copy()
        removed = size = examined = 0
        while limit is None or examined < limit:
            # An HSCAN answers keys and sessions in turn: two items a row.
            step = _STEP if limit is None else min(_STEP, limit - examined)
            found = await _next(sweep, 2 * step, scan)
            if not found:
                break
            examined += len(found) // 2
            pairs = [
                (
                    replies.text(found[at + 1], "an effect's session"),
                    replies.text(found[at], "an effect key"),
                )
                for at in range(0, len(found) - 1, 2)
            ]
            groups = by_session(sorted(pairs))
            keys = self._layout.effects(groups[0][0])[:_EFFECT_AT]
            args: list[str | bytes] = [
                VERSION,
                repr(seconds),
                "1" if dry_run else "0",
                str(len(groups)),
            ]
            for session, effect_keys in groups:
                keys += receipt_keys(self._layout, session)
                args += [session, str(len(effect_keys)), *effect_keys]
            gone, freed = _removed(
                await self._link.script("prune_receipts", keys, args), "receipts"
            )
            removed, size = removed + gone, size + freed
        if not dry_run:
            self._walks.receipts = Sweep() if sweep.ended else sweep
        return _Kind(removed, size, sweep.ended)

    async def _prune_counts(self, seconds: float, limit: int | None, dry_run: bool) -> _Kind:
        pattern = self._layout.counts_pattern()

        async def scan(cursor: int) -> tuple[int, list[bytes]]:
            reply = await self._link.command(
                "prune", "SCAN", cursor, "MATCH", pattern, "COUNT", _SCAN_STEP
            )
            cursor, keys = _scanned(reply, "SCAN")
            return cursor, [key for key in keys if self._layout.tagged(key) is not None]

        upgraded = await self._link.command("prune", "GET", self._layout.names[UPGRADED])
        stamp = b"" if upgraded is None else replies.blob(upgraded, "the upgrade time")
        args: list[str | bytes] = [VERSION, repr(seconds), stamp, "1" if dry_run else "0"]
        sweep = Sweep() if limit is None else self._walks.counts.copy()
        removed = size = examined = 0
        while limit is None or examined < limit:
            step = _STEP if limit is None else min(_STEP, limit - examined)
            found = await _next(sweep, step, scan)
            if not found:
                break
            examined += len(found)
            for counts in found:
                session = self._layout.tagged(counts)
                assert session is not None
                keys = [*self._layout.globals, *session]
                gone, freed = _removed(
                    await self._link.script("prune_counts", keys, args), "counts"
                )
                removed, size = removed + gone, size + freed
        if not dry_run:
            self._walks.counts = Sweep() if sweep.ended else sweep
        return _Kind(removed, size, sweep.ended)


def receipt_keys(layout: JournalKeys, session_id: str) -> list[bytes]:
    """A session's keys as ``prune_receipts.lua`` takes them: its effect keys, then its
    unresolved intents (``open``: a receipt of a session with one stays)."""
    return [*layout.effects(session_id)[_EFFECT_AT:], layout.session(session_id)[_OPEN_AT]]


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
