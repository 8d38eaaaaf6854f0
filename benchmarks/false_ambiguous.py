"""How often another writer makes a failed append come out AMBIGUOUS although its fate is known.

Each trial opens a fresh session (a file ``SQLiteSession`` holding 1 to 40 items of history,
then one turn appended through ``ReconcilingSession``), makes our next 3-item append fail,
and calls ``reconcile()``:

- the failure is ``REJECT`` (nothing written: the batch is missing) or ``LOST_ACK`` (the
  batch landed, the reply was lost), so the truth is known in every trial;
- another worker appends ``k`` unrelated items (``k`` in 1..3) straight to the same store:
  after our failed append and before reconciliation (the main case), or before our append,
  or inside it (after the wrapper read the tail, before our batch reaches the store);
- the control has no concurrent writer.

A trial counts as false-AMBIGUOUS when ``reconcile()`` denies it as ``AMBIGUOUS``. A verdict
that contradicts the truth (COMMITTED for a missing batch, UNCHANGED for a landed one, a
duplicate after replaying, history touched by a denial) counts as wrong; there must be none.
The trials of all cases run interleaved, in a shuffled order per round.

Usage::

    python benchmarks/false_ambiguous.py            # full run (about ten seconds)
    python benchmarks/false_ambiguous.py --quick    # smoke run, a few seconds
    python benchmarks/false_ambiguous.py --trials 1400
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import history_items, print_machine, print_table, turn_items, verdict
from agents import SQLiteSession, set_tracing_disabled

from agents_reconcile import (
    ContinuationDenied,
    IntentJournal,
    Outcome,
    ReconcileConfig,
    ReconcilingSession,
)
from agents_reconcile._backends.opening import open_journal
from agents_reconcile._core.fingerprint import digest_items
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

SEED = 20_251_130
HISTORY_ITEMS = (1, 40)  # stored items before the trial's turns, drawn uniformly
FOREIGN_COUNTS = (1, 2, 3)
TRIAL_TIMEOUT_SECONDS = 30.0
TRUTH = {Fault.REJECT: "batch missing", Fault.LOST_ACK: "batch landed"}

# Whether this version of the wrapper can be told to re-read the tail before every append.
CAN_VERIFY_TAIL = "verify_tail" in {field.name for field in dataclasses.fields(ReconcileConfig)}


@dataclass(frozen=True)
class Settings:
    trials: int
    time_limit_seconds: float


FULL = Settings(trials=700, time_limit_seconds=180.0)
QUICK = Settings(trials=70, time_limit_seconds=8.0)


@dataclass(frozen=True)
class Case:
    """Where the other writer's items land, relative to our failed append."""

    label: str
    options: tuple[tuple[str, Any], ...] = ()  # ReconcileConfig settings besides the journal


CONTROL = Case("none (control)")
AFTER = Case("after our failed append")
BEFORE = Case("before our append (default config)")
BEFORE_VERIFIED = Case("before our append, verify_tail=True", (("verify_tail", True),))
INSIDE = Case("inside our append, after the tail read")


@dataclass(frozen=True)
class Cell:
    case: Case
    fault: Fault
    foreign: int | None  # items the other writer appends; None: 1..3 in turn


@dataclass
class Tally:
    trials: int = 0
    ambiguous: int = 0
    wrong: int = 0
    stale: int = 0
    verdicts: Counter[str] = dataclasses.field(default_factory=Counter)


def build_cells() -> list[Cell]:
    faults = (Fault.REJECT, Fault.LOST_ACK)
    cells = [Cell(CONTROL, fault, 0) for fault in faults]
    cells += [Cell(AFTER, fault, k) for fault in faults for k in FOREIGN_COUNTS]
    before_cases = [BEFORE, BEFORE_VERIFIED] if CAN_VERIFY_TAIL else [BEFORE]
    cells += [Cell(case, fault, None) for case in (*before_cases, INSIDE) for fault in faults]
    return cells


# -- sessions ---------------------------------------------------------------------------------


class LandsFirst:
    """Forwards to ``inner``; when armed, the next ``add_items`` first appends another
    writer's items, so they land between the wrapper's tail read and our batch."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.session_id: str = inner.session_id
        self.armed: list[Any] = []

    async def get_items(self, limit: int | None = None) -> list[Any]:
        items: list[Any] = await self.inner.get_items(limit)
        return items

    async def add_items(self, items: list[Any]) -> None:
        foreign, self.armed = self.armed, []
        if foreign:
            await self.inner.add_items(foreign)
        await self.inner.add_items(items)

    async def pop_item(self) -> Any:
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self.inner.clear_session()


def foreign_items(trial: int, count: int) -> list[dict[str, Any]]:
    """Items another worker appends to the same session: unrelated to ours."""
    return [
        {"role": "assistant", "content": f"Worker 2, trial {trial}, note {index}: restocked."}
        for index in range(count)
    ]


def occurrences(items: Sequence[Any], batch: Sequence[Any]) -> int:
    size = len(batch)
    return sum(
        1 for start in range(len(items) - size + 1) if list(items[start : start + size]) == batch
    )


# -- one trial --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    verdict: str
    wrong: bool
    stale: bool


async def run_trial(
    workdir: Path, journal: IntentJournal, cell: Cell, trial: int, history: int, foreign: int
) -> Result:
    session_id = f"trial-{trial}"
    store = SQLiteSession(session_id, workdir / "sessions.db")
    try:
        return await _trial(store, journal, cell, trial, history, foreign)
    finally:
        store.close()


async def _trial(
    store: SQLiteSession, journal: IntentJournal, cell: Cell, trial: int, history: int, foreign: int
) -> Result:
    fault, case = cell.fault, cell.case
    landing = LandsFirst(store)
    faulty = FaultInjectingSession(landing)
    config = ReconcileConfig(journal=journal, **dict(case.options))
    session = ReconcilingSession(faulty, config=config)
    if not session.enabled:
        sys.exit("AGENTS_RECONCILE switches reconciliation off; unset it to benchmark the wrapper")

    stored = history_items(0, history)
    await store.add_items(stored)
    await session.get_items()  # the runner reads the history before it saves
    earlier = turn_items(2 * trial)
    await session.add_items([dict(item) for item in earlier])
    stored += earlier

    theirs = foreign_items(trial, foreign)
    ours = turn_items(2 * trial + 1)
    if case is BEFORE or case is BEFORE_VERIFIED:
        await store.add_items(theirs)
        stored += theirs
        faulty.plan(fault)
    elif case is INSIDE and fault is Fault.REJECT:
        faulty.plan(Fault.CONCURRENT_WRITER, foreign_items=theirs)
        stored += theirs
    elif case is INSIDE:
        landing.armed = list(theirs)
        faulty.plan(fault)
        stored += theirs
    else:
        faulty.plan(fault)
    preceding = list(stored)  # what the store holds just before our batch (would have) landed

    try:
        await session.add_items([dict(item) for item in ours])
    except BackendFailure:
        pass
    else:
        raise RuntimeError(f"trial {trial}: the injected {fault.name} did not fire")
    if case is AFTER:
        await store.add_items(theirs)

    [intent] = await session.pending()
    recorded = intent.before_digests
    fresh = digest_items(preceding[len(preceding) - len(recorded) :], ignore_ids=intent.ignore_ids)
    stale = recorded != fresh

    # The truth, checked against the store itself: our batch is there exactly when it landed.
    snapshot = await store.get_items()
    expected = (
        preceding + (ours if fault is Fault.LOST_ACK else []) + (theirs if case is AFTER else [])
    )
    if snapshot != expected or occurrences(snapshot, ours) != (fault is Fault.LOST_ACK):
        raise RuntimeError(f"trial {trial}: the store does not hold what {fault.name} implies")

    try:
        decisions = await session.reconcile()
    except ContinuationDenied as denied:
        decision = denied.decision
    else:
        if len(decisions) != 1:
            raise RuntimeError(f"trial {trial}: {len(decisions)} decisions for one intent")
        decision = decisions[0]
    after = await store.get_items()

    outcome = decision.outcome
    if outcome is Outcome.AMBIGUOUS:
        wrong = after != snapshot  # a denial must leave the history untouched
    else:
        expected = Outcome.COMMITTED if fault is Fault.LOST_ACK else Outcome.UNCHANGED
        wrong = outcome is not expected or occurrences(after, ours) != 1
    label = f"{outcome.value}/{decision.reason.value}/{decision.action.value}"
    return Result(outcome, label, wrong, stale)


# -- the run ------------------------------------------------------------------------------------


async def run_trials(
    workdir: Path, settings: Settings, cells: Sequence[Cell]
) -> tuple[dict[Cell, Tally], int]:
    rng = random.Random(SEED)
    tallies = {cell: Tally() for cell in cells}
    journal = open_journal(workdir / "journal.db")
    deadline = time.monotonic() + settings.time_limit_seconds
    done = 0
    try:
        order: list[Cell] = []
        for trial in range(settings.trials):
            if time.monotonic() > deadline:
                break
            if not order:  # a new round: every cell once, in a shuffled order
                order = list(cells)
                rng.shuffle(order)
            cell = order.pop()
            tally = tallies[cell]
            foreign = (
                cell.foreign
                if cell.foreign is not None
                else FOREIGN_COUNTS[tally.trials % len(FOREIGN_COUNTS)]
            )
            history = rng.randint(*HISTORY_ITEMS)
            async with asyncio.timeout(TRIAL_TIMEOUT_SECONDS):
                result = await run_trial(workdir, journal, cell, trial, history, foreign)
            tally.trials += 1
            tally.ambiguous += result.outcome is Outcome.AMBIGUOUS
            tally.wrong += result.wrong
            tally.stale += result.stale
            tally.verdicts[result.verdict] += 1
            done += 1
    finally:
        await journal.close()
    return tallies, done


def rate(ambiguous: int, trials: int) -> str:
    return f"{100.0 * ambiguous / trials:.1f}%" if trials else "n/a"


def print_results(tallies: dict[Cell, Tally], done: int, settings: Settings) -> None:
    rows = []
    for cell, tally in tallies.items():
        verdicts = " + ".join(
            f"{name} {count}" if len(tally.verdicts) > 1 else name
            for name, count in tally.verdicts.most_common()
        )
        rows.append(
            [
                cell.case.label,
                f"{cell.fault.name} ({TRUTH[cell.fault]})",
                "1-3" if cell.foreign is None else str(cell.foreign),
                str(tally.trials),
                f"{tally.stale}",
                f"{tally.ambiguous}",
                rate(tally.ambiguous, tally.trials),
                str(tally.wrong),
                verdicts or "-",
            ]
        )
    print_table(
        f"false-AMBIGUOUS rate: {done} trials over {len(tallies)} cases, interleaved (3-item "
        "batch, write_ahead, file SQLiteSession, SQLite journal; k = items the other writer "
        "appends; stale = trials whose intent recorded a tail other than what the store held "
        "just before our batch)",
        [
            "other writer appends",
            "our append failed with",
            "k",
            "trials",
            "stale",
            "AMBIGUOUS",
            "rate",
            "wrong",
            "outcome/reason/action",
        ],
        rows,
    )

    faults = (Fault.REJECT, Fault.LOST_ACK)

    def pooled(case: Case, fault_set: Sequence[Fault], k: int | None = None) -> str:
        chosen = [
            tally
            for cell, tally in tallies.items()
            if cell.case is case and cell.fault in fault_set and (k is None or cell.foreign == k)
        ]
        return rate(sum(t.ambiguous for t in chosen), sum(t.trials for t in chosen))

    matrix = []
    for name, fault_set in (
        ("REJECT", (Fault.REJECT,)),
        ("LOST_ACK", (Fault.LOST_ACK,)),
        ("both", faults),
    ):
        matrix.append(
            [
                name,
                pooled(CONTROL, fault_set),
                *(pooled(AFTER, fault_set, k) for k in FOREIGN_COUNTS),
                pooled(AFTER, fault_set),
            ]
        )
    print_table(
        "false-AMBIGUOUS rate by failure mode and k, other writer appending after our failed "
        "append (k = 0: the control, no other writer)",
        ["failure", "k = 0", *(f"k = {k}" for k in FOREIGN_COUNTS), "k = 1-3"],
        matrix,
    )
    if done < settings.trials:
        print(
            f"  note: stopped at the {settings.time_limit_seconds:.0f} s time limit after {done} "
            f"of {settings.trials} trials.\n"
        )
    if not CAN_VERIFY_TAIL:
        print(
            "  note: this version of ReconcileConfig has no verify_tail, so the case with the\n"
            "  tail re-read before every append was not run.\n"
        )
    print(
        "  Why: the rule finds our batch by content, right after the tail the wrapper recorded\n"
        "  before appending. Items another writer adds after our failed append, or before our\n"
        "  batch while the recorded tail is out of date (column stale), fit neither reading;\n"
        "  a content fingerprint cannot tell a legitimate extension from corruption, so the\n"
        "  rule fails closed: AMBIGUOUS, although the batch is known to be there (LOST_ACK) or\n"
        "  missing (REJECT). Revisioned stores (compare-and-swap on the store's revision, each\n"
        "  append carrying a write id; planned) are what bring this rate down: the store then\n"
        "  says whether our write id landed, so these trials settle as COMMITTED, or EXTENDED\n"
        "  (ours absent, others' present), instead of AMBIGUOUS.\n"
    )


def summarise(tallies: dict[Cell, Tally]) -> bool:
    """Print the summary; whether the hard checks (control at 0, no wrong verdict) held."""

    def pooled(case: Case) -> tuple[int, int]:
        chosen = [tally for cell, tally in tallies.items() if cell.case is case]
        return sum(t.ambiguous for t in chosen), sum(t.trials for t in chosen)

    control_ambiguous, control_trials = pooled(CONTROL)
    wrong = sum(tally.wrong for tally in tallies.values())
    held = control_ambiguous == 0 and wrong == 0
    print("summary")
    print(
        f"  {verdict(held)}: control {rate(control_ambiguous, control_trials)} false-AMBIGUOUS "
        f"({control_ambiguous}/{control_trials}; must be 0) and {wrong} wrong verdicts in "
        f"{sum(t.trials for t in tallies.values())} trials (must be 0)"
    )
    after_ambiguous, after_trials = pooled(AFTER)
    print(
        f"  other writer {AFTER.label}: {rate(after_ambiguous, after_trials)} false-AMBIGUOUS "
        f"({after_ambiguous}/{after_trials}; the content-fingerprint rule predicts 100%)"
    )
    for case in (BEFORE, BEFORE_VERIFIED, INSIDE):
        ambiguous, trials = pooled(case)
        if trials:
            print(
                f"  other writer {case.label}: {rate(ambiguous, trials)} false-AMBIGUOUS "
                f"({ambiguous}/{trials})"
            )
    return held


async def run(settings: Settings, mode: str) -> bool:
    with tempfile.TemporaryDirectory(prefix="agents-reconcile-bench-") as directory:
        workdir = Path(directory)
        print_machine(
            "agents-reconcile false-AMBIGUOUS benchmark (concurrent writers)",
            workdir,
            mode,
            extra=[("seed", str(SEED))],
        )
        run_started = time.perf_counter()
        cells = build_cells()
        tallies, done = await run_trials(workdir, settings, cells)
        print_results(tallies, done, settings)
        held = summarise(tallies)
        print(f"\ntotal time {time.perf_counter() - run_started:.1f} s")
        return held


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--trials",
        type=int,
        help=f"trials in all, spread evenly over the cases (default {FULL.trials}; "
        f"quick {QUICK.trials})",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small numbers for a smoke run (under 10 s)"
    )
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    if args.trials is not None:
        cells = len(build_cells())
        if args.trials < cells:
            parser.error(f"--trials must be at least {cells} (one per case)")
        settings = dataclasses.replace(settings, trials=args.trials)
    set_tracing_disabled(True)
    # Every denial is logged as a warning; the tables count them instead.
    logging.getLogger("agents_reconcile").setLevel(logging.ERROR)
    held = asyncio.run(run(settings, "quick" if args.quick else "full"))
    if not held:
        sys.exit(1)


if __name__ == "__main__":
    main()
