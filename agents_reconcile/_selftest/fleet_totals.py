"""The fleet self-test's closing lines (``fleet``): the settlement phase's title, and the
totals under every table."""

from __future__ import annotations

from typing import TextIO

from .fleet_report import CellResult, SettleResult, percentile, render_summary

__all__ = ["print_totals", "settlement_title"]


def settlement_title(settle_sessions: int, workers: int) -> str:
    title = "settlement throughput (no faults)"
    return "\n".join(
        [
            title,
            "-" * len(title),
            f"{settle_sessions} sessions on one revisioned SQLite store file, each "
            "holding one failed append (rejected before writing); "
            f"{workers} workers on hosts of their own, told to go at once, each "
            "reconcile every session in an order of their own until none is pending. Seconds: "
            "from the go to the last settling decision in the journal.",
        ]
    )


def print_totals(
    results: list[CellResult], settlement: list[SettleResult], elapsed: float, out: TextIO
) -> None:
    print(render_summary(results), file=out)
    for phase in settlement:
        print(
            f"\nSettlements per second on a shared {phase.journal} journal with "
            f"{phase.workers} workers: {phase.per_second:.0f}/s ({phase.settlements} failed "
            f"appends settled in {phase.seconds:.2f} s; settled twice {phase.settled_twice}, "
            f"stored twice {phase.stored_twice}, lost {phase.lost}, unsettled "
            f"{phase.unsettled}; {sum(phase.denied.values())} denials where workers met "
            "each other's claims).",
            end="",
            file=out,
        )
    if settlement:
        print(file=out)
    settled = sum(r.settlements for r in results)
    wall = sum(r.wall for r in results)
    takeovers = [t for r in results for t in r.takeovers]
    print(
        f"\nDuring the fault rounds: {settled} settling decisions in {wall:.0f} s "
        "(the pace at which faults leave intents to settle, not a throughput).",
        file=out,
    )
    p50, p99 = percentile(takeovers, 0.5), percentile(takeovers, 0.99)
    print(
        "Takeover of an expired lease (from a worker stopping itself inside an append until "
        "another process took its intent over and decided on it): "
        + (f"p50 {p50:.2f} s, p99 {p99:.2f} s over {len(takeovers)}." if p50 and p99 else "none."),
        file=out,
    )
    broken = [r for r in results if not r.clean]
    broken_phases = [r for r in settlement if not r.clean]
    print(
        f"\n{len(results)} cells and {len(settlement)} settlement phases in {elapsed:.0f} s; ",
        end="",
        file=out,
    )
    print(
        f"{len(broken) + len(broken_phases)} broke a promise."
        if broken or broken_phases
        else "every count is 0.",
        file=out,
    )
