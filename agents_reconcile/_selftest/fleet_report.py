"""The fleet self-test's judge and its tables.

The judge reads the workers' logs, the store (afresh, through a new connection) and the
journal's decisions, and counts, per cell, what must never happen:

- **stored twice**: items found more than once in their session's history;
- **lost**: items the store must hold but does not: an append acknowledged ok to its worker,
  or an intent for the item that a decision replayed, or settled as found committed;
- **settled twice**: intents with more than one settling decision (settled, replayed or
  dropped) in ``journal.decisions``;
- **stale writes**: appends acknowledged ok to their worker although the journal holds a
  decision on that very intent by a process that took it over and judged the batch absent
  (outcome ``unchanged`` or ``extended``), replayed it or dropped it, and the item is stored
  more often than others replayed it. The worker's own write then landed after another process
  had claimed the intent and found it missing: it wrote under a claim it no longer held. (A
  worker whose fenced write was refused because the replay on its behalf holds its write id
  is acknowledged ok without writing: not counted.) Denials made without taking the intent
  over (``in_flight_elsewhere``, ``lease_expired``, ``session_busy``) leave it with its owner
  and do not count;
- **continued on doubt**: appends acknowledged ok on a session although an item of that
  session vouched for before the append started (acknowledged ok, or replayed or settled
  as committed by a decision made before) is missing from the history, or stored after it.

A worker logs the intent ids minted for its items, so decisions (which are payload-free) are
tied to items by intent id.

The settlement throughput phase is judged apart (``judge_settlement``): one failed intent per
session, settled by every worker racing over every session; it counts the settling decisions
and the time from the go to the last of them, and checks that no intent was settled twice,
that each session holds its batch exactly once, and that none was left pending.
"""

from __future__ import annotations

import bisect
import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

__all__ = [
    "CellResult",
    "Fault",
    "Pause",
    "SettleResult",
    "judge_cell",
    "judge_settlement",
    "percentile",
    "render_cell",
    "render_settlement",
    "render_summary",
]

COUNTS: Final = ("stored_twice", "lost", "settled_twice", "stale_writes", "continued_on_doubt")
"""What the judge counts; every one must be 0."""
SETTLING: Final = frozenset({"settled", "replayed", "dropped"})
_NOT_TAKEN: Final = frozenset({"in_flight_elsewhere", "lease_expired", "session_busy"})
"""Denials made without taking the intent over: its owner still holds it."""
_JUDGED_ABSENT: Final = frozenset({"unchanged", "extended", "partial"})
_TAKEN_ACTIONS: Final = frozenset({"replayed", "dropped"})
_DECISIONS_READ: Final = 100_000
_FAULTS: Final = ("kill", "pause", "pause_in_flight", "drop_reply", "restart")
_CLUSTER_FAULTS: Final = ("failover", "kill_primary")
"""Faults of cells on a Redis Cluster (``fleet_cluster``), listed where injected."""


@dataclass(frozen=True)
class Pause:
    """A worker stopped with SIGSTOP and resumed with SIGCONT (wall-clock times)."""

    worker: str
    stopped: float
    resumed: float
    in_flight: bool
    """It stopped itself inside an append, its intent durable and its write not started."""


@dataclass(frozen=True)
class Fault:
    """One fault the driver injected (wall-clock times): from when it began until the driver
    went on (a primary kill lasts until the replica took over and the node was started again)."""

    kind: str
    target: str
    began: float
    ended: float


@dataclass
class CellResult:
    """What one journal x store cell did and what the judge found."""

    journal: str
    store: str
    workers: int
    sessions: int
    rounds: int = 0
    wall: float = 0.0
    faults: Counter[str] = field(default_factory=Counter)
    timeline: list[Fault] = field(default_factory=list)
    """Every fault counted in ``faults``, in the order injected."""
    notes: list[str] = field(default_factory=list)
    ok: int = 0
    denied: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    raised_at: dict[str, str] = field(default_factory=dict)
    """For each error not of this package among the failed appends, where the first was
    raised and what it said."""
    killed_mid_append: int = 0
    final: Counter[str] = field(default_factory=Counter)
    settlements: int = 0
    takeovers: list[float] = field(default_factory=list)
    not_taken_over: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    examples: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not any(self.counts.values())

    def injected(self, kind: str, target: str, began: float) -> None:
        """Count a fault of ``kind`` on ``target`` that began at ``began`` and is over now."""
        self.faults[kind] += 1
        self.timeline.append(Fault(kind, target, began, time.time()))

    def nearest_fault(self, began: float, ended: float | None) -> str:
        """Which injected fault lies nearest the span from ``began`` to ``ended`` (an append
        never ended: to the end of the run), said as a clause for an example."""
        if not self.timeline:
            return "no fault injected"
        end = ended if ended is not None else float("inf")

        def gap(fault: Fault) -> float:
            return max(0.0, fault.began - end, began - fault.ended)

        fault = min(self.timeline, key=gap)
        where = f"{fault.kind} of {fault.target}"
        if gap(fault) == 0.0:
            return f"during {where}"
        if fault.ended < began:
            return f"{began - fault.ended:.2f} s after {where} ended"
        return f"{fault.began - end:.2f} s before {where}"

    @property
    def settlements_per_second(self) -> float:
        return self.settlements / self.wall if self.wall > 0 else 0.0


@dataclass
class SettleResult:
    """What the settlement throughput phase did on one journal and what the judge found."""

    journal: str
    workers: int
    sessions: int
    prepared: int = 0
    """Sessions left holding one failed intent before the go."""
    settlements: int = 0
    """Settling decisions (settled, replayed, dropped) in the journal."""
    seconds: float = 0.0
    """From the go to the last settling decision."""
    calls: int = 0
    """``reconcile()`` calls the workers made."""
    denied: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    settled_by: Counter[str] = field(default_factory=Counter)
    settled_twice: int = 0
    stored_twice: int = 0
    lost: int = 0
    """Sessions whose batch is not in their history."""
    unsettled: int = 0
    """Sessions with no settling decision."""
    notes: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return self.settlements / self.seconds if self.seconds > 0 else 0.0

    @property
    def clean(self) -> bool:
        broken = self.settled_twice or self.stored_twice or self.lost or self.unsettled
        return not broken and self.prepared == self.sessions


def judge_settlement(
    result: SettleResult,
    directory: Path,
    histories: dict[str, list[Any]],
    decisions: list[Any],
    expected: dict[str, str],
    go: float,
) -> None:
    """Fill ``result`` from the prepare and settle logs under ``directory``, each session's
    ``histories``, the journal's ``decisions`` and the text ``expected`` in each session."""
    for path in sorted(directory.glob("*.log")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("event")
            if kind == "prepared" and event.get("outcome") == "failed":
                result.prepared += 1
            elif kind == "prepared":
                _settle_example(result, f"{event.get('session')} prepared: {event.get('outcome')}")
            elif kind == "settle":
                result.calls += 1
                outcome = event.get("outcome")
                if outcome == "ok":
                    result.settled_by[path.stem] += sum(
                        action in SETTLING for _, action, _ in event.get("decisions", [])
                    )
                elif outcome == "denied":
                    result.denied[str(event.get("reason"))] += 1
                else:
                    result.errors[f"{event.get('error')}:{event.get('reason') or ''}"] += 1
            elif kind == "settle_end" and not event.get("told"):
                result.notes.append(f"{path.stem} was never told to go")
    settling = [d for d in decisions if d.action.value in SETTLING]
    result.settlements = len(settling)
    if settling:
        result.seconds = max(d.decided_at for d in settling) - go
    for intent_id, seen in Counter(d.intent_id for d in settling).items():
        if seen > 1:
            result.settled_twice += 1
            _settle_example(result, f"intent {intent_id} settled {seen} times")
    settled = {d.session_id for d in settling}
    for sid, text in expected.items():
        texts = [
            str(item.get("content")) if isinstance(item, dict) else repr(item)
            for item in histories.get(sid, [])
        ]
        copies = texts.count(text)
        if copies > 1:
            result.stored_twice += 1
            _settle_example(result, f"{text} stored {copies} times in {sid}")
        elif copies == 0:
            result.lost += 1
            _settle_example(result, f"{text} missing from {sid}")
        if sid not in settled:
            result.unsettled += 1


def _settle_example(result: SettleResult, text: str) -> None:
    if len(result.examples) < 5:
        result.examples.append(text)


@dataclass
class _Append:
    item: str
    session: str
    worker: str
    started: float
    ended: float | None = None
    outcome: str = "killed"
    detail: str = ""
    raised_at: str = ""


def _read_logs(directory: Path) -> tuple[dict[str, _Append], dict[str, str], list[dict[str, Any]]]:
    """Appends by item, the item of each minted intent id, and the final pass's lines."""
    appends: dict[str, _Append] = {}
    intents: dict[str, str] = {}
    final: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.log")):
        worker = path.stem
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut short by SIGKILL
            kind = event.get("event")
            if kind == "intent" and isinstance(event.get("item"), str):
                intents[event["intent"]] = event["item"]
            elif kind == "start":
                appends[event["item"]] = _Append(
                    event["item"], event["session"], worker, event["t"]
                )
            elif kind == "end" and event["item"] in appends:
                append = appends[event["item"]]
                append.ended, append.outcome = event["t"], event["outcome"]
                append.detail = event.get("reason") or event.get("error") or ""
                if event["outcome"] == "error" and event.get("reason"):
                    append.detail = f"{event['error']}:{event['reason']}"
                if event.get("where"):
                    append.raised_at = f"{event['where']}: {event.get('message', '')}"
            elif kind == "final":
                final.append(event)
    return appends, intents, final


def judge_cell(
    result: CellResult,
    directory: Path,
    histories: dict[str, list[Any]],
    decisions: list[Any],
    pauses: list[Pause],
    phase: tuple[float, float],
) -> None:
    """Fill ``result`` from the logs under ``directory``, each session's stored ``histories``
    and the journal's ``decisions`` (``records.Decision``, any order)."""
    appends, intents, final = _read_logs(directory)
    for append in appends.values():
        if append.outcome == "ok":
            result.ok += 1
        elif append.outcome == "denied":
            result.denied[append.detail] += 1
        elif append.outcome == "error":
            result.failed[append.detail or "?"] += 1
            if append.raised_at:
                result.raised_at.setdefault(append.detail or "?", append.raised_at)
        else:
            result.killed_mid_append += 1
    for line in final:
        decided = line["outcome"] == "decided"
        result.final[str(line.get("action") if decided else line.get("reason") or "error")] += 1
    stored: dict[str, list[str]] = {
        sid: [str(item.get("content")) if isinstance(item, dict) else repr(item) for item in items]
        for sid, items in histories.items()
    }
    counts = result.counts
    for sid, texts in stored.items():
        for text, seen in Counter(texts).items():
            if seen > 1:
                counts["stored_twice"] += 1
                _example(result, f"{text} stored {seen} times in {sid}", appends.get(text))
    # Decisions by intent; which items they vouch for, and when.
    by_intent: dict[str, list[Any]] = defaultdict(list)
    for decision in decisions:
        by_intent[decision.intent_id].append(decision)
    minted_for: dict[str, list[str]] = defaultdict(list)
    for intent_id, text in intents.items():
        minted_for[text].append(intent_id)
    vouched: dict[str, float] = {
        item: append.ended
        for item, append in appends.items()
        if append.outcome == "ok" and append.ended is not None
    }
    for intent_id, made in by_intent.items():
        settling = [d for d in made if d.action.value in SETTLING]
        if len(settling) > 1:
            counts["settled_twice"] += 1
            _example(
                result,
                f"intent {intent_id} settled {len(settling)} times",
                appends.get(intents.get(intent_id, "")),
            )
        item = intents.get(intent_id)
        for decision in settling:
            if decision.decided_at <= phase[1]:
                result.settlements += 1
            vouching = decision.action.value == "replayed" or (
                decision.action.value == "settled" and decision.outcome.value == "committed"
            )
            if item is not None and vouching:
                vouched[item] = min(vouched.get(item, decision.decided_at), decision.decided_at)
        if item is not None and appends.get(item, None) is not None:
            append = appends[item]
            taken = [
                d
                for d in made
                if d.outcome.value in _JUDGED_ABSENT or d.action.value in _TAKEN_ACTIONS
            ]
            copies = stored.get(append.session, []).count(item)
            replays = sum(
                d.action.value == "replayed"
                for intent in minted_for.get(item, [])
                for d in by_intent.get(intent, [])
            )
            if append.outcome == "ok" and taken and copies > replays:
                counts["stale_writes"] += 1
                _example(
                    result,
                    f"{item} acknowledged ok to {append.worker}, and intent {intent_id} was "
                    f"{taken[0].action.value} ({taken[0].reason.value}) by another process",
                    append,
                )
    # Where each item is first stored.
    positions = {
        sid: {text: index for index, text in reversed(list(enumerate(texts)))}
        for sid, texts in stored.items()
    }
    for item, _ in sorted(vouched.items(), key=lambda pair: pair[1]):
        home = item_session(item, appends)
        if home is not None and item not in positions.get(home, {}):
            counts["lost"] += 1
            _example(result, f"{item} vouched for and missing from {home}", appends.get(item))
    _doubt(result, appends, vouched, positions)
    _takeovers(result, appends, intents, by_intent, pauses)


def item_session(item: str, appends: dict[str, _Append]) -> str | None:
    """The session an item was appended to."""
    append = appends.get(item)
    return None if append is None else append.session


def _doubt(
    result: CellResult,
    appends: dict[str, _Append],
    vouched: dict[str, float],
    positions: dict[str, dict[str, int]],
) -> None:
    missing: Final = 1 << 60
    per_session: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    for item, when in vouched.items():
        sid = item_session(item, appends)
        if sid is not None:
            per_session[sid].append((when, positions.get(sid, {}).get(item, missing), item))
    for sid, entries in per_session.items():
        entries.sort()
        times = [when for when, _, _ in entries]
        furthest: list[tuple[int, str]] = []
        best = (-1, "")
        for _, position, item in entries:
            best = max(best, (position, item))
            furthest.append(best)
        for append in appends.values():
            if append.session != sid or append.outcome != "ok":
                continue
            before = bisect.bisect_left(times, append.started)
            here = positions.get(sid, {}).get(append.item)
            if before and here is not None and furthest[before - 1][0] > here:
                result.counts["continued_on_doubt"] += 1
                _example(
                    result,
                    f"{append.item} acknowledged ok in {sid} with {furthest[before - 1][1]} "
                    "missing before it",
                    append,
                )


def _takeovers(
    result: CellResult,
    appends: dict[str, _Append],
    intents: dict[str, str],
    by_intent: dict[str, list[Any]],
    pauses: list[Pause],
) -> None:
    """Time from a worker stopping itself inside an append until another process decides on
    that intent after taking it over (a settlement, or a denial other than those that leave
    it with its owner). Other workers' appends on the session are not counted: they cannot
    tell which intent they got past."""
    minted: dict[str, list[str]] = defaultdict(list)
    for intent_id, item in intents.items():
        minted[item].append(intent_id)
    for pause in pauses:
        if not pause.in_flight:
            continue
        held = _paused_append(appends, pause)
        if held is None:
            continue
        candidates = [
            d.decided_at
            for intent_id in minted.get(held.item, [])
            for d in by_intent.get(intent_id, [])
            if d.reason.value not in _NOT_TAKEN and pause.stopped <= d.decided_at
        ]
        first = min(candidates, default=None)
        if first is None or first > pause.resumed:
            result.not_taken_over += 1
        else:
            result.takeovers.append(first - pause.stopped)


def _paused_append(appends: dict[str, _Append], pause: Pause) -> _Append | None:
    """The append a worker was inside when it stopped itself: its last one started before."""
    found = None
    for append in appends.values():
        if (
            append.worker == pause.worker
            and append.started <= pause.stopped
            and (found is None or append.started > found.started)
        ):
            found = append
    return found


def _example(result: CellResult, text: str, append: _Append | None = None) -> None:
    """Keep the first few examples; one about an append says which fault lay nearest it."""
    if len(result.examples) < 5:
        if append is not None:
            near = result.nearest_fault(append.started, append.ended)
            text = f"{text} (appended by {append.worker}, {near})"
        result.examples.append(text)


def percentile(values: list[float], fraction: float) -> float | None:
    """The value at ``fraction`` (0..1) of the sorted values (nearest rank), or None."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


def _listed(counter: Counter[str]) -> str:
    if not counter:
        return "-"
    return ", ".join(f"{name or '?'} {count}" for name, count in counter.most_common())


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def render_cell(result: CellResult) -> str:
    """One cell's table."""
    faults = ", ".join(
        f"{kind} {result.faults[kind]}"
        for kind in _FAULTS + tuple(k for k in _CLUSTER_FAULTS if k in result.faults)
    )
    rows = [
        ("rounds", f"{result.rounds} in {result.wall:.1f} s"),
        ("faults injected", faults),
        ("appends ok", str(result.ok)),
        ("appends denied", f"{sum(result.denied.values())} ({_listed(result.denied)})"),
        ("appends failed", f"{sum(result.failed.values())} ({_listed(result.failed)})"),
        ("killed mid-append", str(result.killed_mid_append)),
        ("final pass", _listed(result.final)),
        (
            "settlements",
            f"{result.settlements} ({result.settlements_per_second:.2f}/s of the run)",
        ),
        (
            "takeover after pause",
            f"p50 {_seconds(percentile(result.takeovers, 0.5))}, "
            f"p99 {_seconds(percentile(result.takeovers, 0.99))} "
            f"({len(result.takeovers)} taken over, {result.not_taken_over} not before SIGCONT)",
        ),
        *((name.replace("_", " "), str(result.counts[name])) for name in COUNTS),
    ]
    width = max(len(name) for name, _ in rows)
    title = f"journal {result.journal} x store {result.store}"
    lines = [title, "-" * len(title)]
    lines += [f"  {name.ljust(width)}  {value}" for name, value in rows]
    lines += [f"  note: {note}" for note in result.notes]
    lines += [f"  e.g. {example}" for example in result.examples]
    lines += [f"  {name} raised at {place}" for name, place in sorted(result.raised_at.items())]
    if not result.clean and result.timeline:
        start = result.timeline[0].began
        lines.append("  faults in order (seconds from the first):")
        lines += [
            f"    {fault.began - start:7.2f}-{fault.ended - start:.2f}  {fault.kind} {fault.target}"
            for fault in result.timeline
        ]
    return "\n".join(lines)


def render_summary(results: list[CellResult]) -> str:
    """Every cell on one line: its counts."""
    header = ("journal", "store", "ok", "denied", "failed", *COUNTS)
    rows = [
        (
            r.journal,
            r.store,
            str(r.ok),
            str(sum(r.denied.values())),
            str(sum(r.failed.values())),
            *(str(r.counts[name]) for name in COUNTS),
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) for row in [header, *rows]
    )


def render_settlement(results: list[SettleResult]) -> str:
    """The settlement throughput phase: one line per journal."""
    header = (
        "journal", "workers", "settlements", "seconds", "per s", "settled twice",
        "stored twice", "lost", "unsettled", "calls", "per worker", "denials (claims met)",
    )  # fmt: skip
    rows = [
        (
            r.journal,
            str(r.workers),
            f"{r.settlements}/{r.sessions}",
            f"{r.seconds:.2f}",
            f"{r.per_second:.0f}",
            str(r.settled_twice),
            str(r.stored_twice),
            str(r.lost),
            str(r.unsettled),
            str(r.calls),
            _spread(r),
            f"{sum(r.denied.values())} ({_listed(r.denied)})",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in [header, *rows]
    ]
    for r in results:
        lines += [f"  {r.journal}: note: {note}" for note in r.notes]
        if r.errors:
            lines.append(f"  {r.journal}: errors: {_listed(r.errors)}")
        if r.prepared != r.sessions:
            lines.append(f"  {r.journal}: only {r.prepared} of {r.sessions} sessions prepared")
        lines += [f"  {r.journal}: e.g. {example}" for example in r.examples]
    return "\n".join(lines)


def _spread(result: SettleResult) -> str:
    """The fewest and most settlements one worker made."""
    counts = [result.settled_by.get(f"s{n}", 0) for n in range(result.workers)]
    return f"{min(counts)}-{max(counts)}" if counts else "-"
