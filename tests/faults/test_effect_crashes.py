"""The self-test's effect tool under SIGKILL, and its judge.

A run killed after the tool charged the card and before the receipt was durable, recovered by
resuming the approval checkpoint, charges once: the tool's ``check`` finds the charge at the
processor and its answer becomes the receipt. The judge counts any effect run twice as a
broken promise, from the evidence a cell leaves (fabricated here, to prove it looks).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from agents_reconcile._core.crashpoints import CrashPoint
from agents_reconcile._core.effect_records import business_effect_key
from agents_reconcile._selftest.matrix import (
    EFFECT_POINTS,
    Cell,
    Verdict,
    judge,
    run_cell,
    stop_servers,
)
from agents_reconcile._selftest.scenario import (
    CALLS_LOG,
    CHECKS_LOG,
    PROCESSOR_LOG,
    TOOLS_LOG,
    RecoveryPath,
    charged,
    read_log,
)

pytestmark = pytest.mark.faults

KEY = "k" * 64
OTHER_KEY = "o" * 64


@pytest.fixture(scope="module", autouse=True)
def fork_servers() -> Iterator[None]:
    yield
    stop_servers()


@pytest.mark.parametrize("path", [RecoveryPath.RESUME_RUN, RecoveryPath.RESUME_STREAMED])
def test_killed_before_the_receipt_a_resumed_checkpoint_charges_once(
    path: RecoveryPath, tmp_path: Path
) -> None:
    cell = Cell("sqlite", path, CrashPoint.BEFORE_RECEIPT, "tool_output", 1)
    verdict = run_cell(cell, tmp_path)
    assert verdict.killed, verdict.problems
    assert verdict.holds, verdict.problems
    assert verdict.outcome == "settled by check"
    assert (verdict.effects_run_twice, verdict.unrecorded_reruns, verdict.reexecuted) == (0, 0, 0)

    requests = list(read_log(tmp_path / PROCESSOR_LOG))
    assert [(r["phase"], r["call_id"], r["charged"]) for r in requests] == [
        ("crash", "charge-1", True)
    ], "charged once, by the process that was killed"
    [body] = read_log(tmp_path / TOOLS_LOG)
    assert (body["phase"], body["key"]) == ("crash", requests[0]["key"])
    [check] = read_log(tmp_path / CHECKS_LOG)
    assert (check["phase"], check["key"], check["found"]) == ("recover", body["key"], True)

    recovery = orjson.loads((tmp_path / "recovery.json").read_bytes())
    assert recovery["outcome"] == "completed"
    [before] = recovery["effects_before"]
    assert (before["key"], before["state"]) == (body["key"], "started")
    [after] = recovery["effects"]
    assert (after["state"], after["attempts"], after["output"]) == ("done", 2, charged(1))


# Every keyed cell also runs in the crash matrix (on SQLite, every path), which judges its
# promises and its outcome; what this adds is the keys charged: each point on one path, each
# path at one point, by default.
@pytest.mark.rotation("path", ())
@pytest.mark.parametrize("point", EFFECT_POINTS, ids=lambda point: point.value)
@pytest.mark.parametrize("path", list(RecoveryPath), ids=lambda path: path.value)
def test_a_tool_with_its_own_key_killed_at_each_effect_point_charges_once(
    path: RecoveryPath, point: CrashPoint, tmp_path: Path
) -> None:
    """The self-test's keyed cells: the tool's key is the order's (``effect_tool(key=...)``);
    killed at each point the effect passes and recovered on each path, every promise holds
    and every charge is made under the order's key."""
    cell = Cell("sqlite", path, point, "tool_output", 1, keyed=True)
    assert cell.row.endswith("(own key)")
    verdict = run_cell(cell, tmp_path)
    assert verdict.killed, verdict.problems
    assert verdict.holds, verdict.problems
    assert (verdict.effects_run_twice, verdict.unrecorded_reruns, verdict.reexecuted) == (0, 0, 0)
    keys = {request["key"] for request in read_log(tmp_path / PROCESSOR_LOG)}
    orders = {business_effect_key("charge_card", f"order-{n}") for n in (1, 2)}
    assert keys and keys <= orders, "charged under the orders' keys (a fresh run buys 2 next)"


# -- the judge, on fabricated evidence ----------------------------------------------------------


def write(directory: Path, name: str, *records: dict[str, Any]) -> None:
    with (directory / name).open("ab") as log:
        for record in records:
            log.write(orjson.dumps(record) + b"\n")


def run_of(phase: str, key: str = KEY, *, charged_now: bool = True) -> dict[str, Any]:
    """What one run of the body leaves: its record, and the processor's."""
    return {"phase": phase, "call_id": "charge-1", "key": key, "charged": charged_now}


def evidence(directory: Path, *runs: dict[str, Any], called_again: bool = True) -> None:
    calls = [{"phase": "crash", "call_id": "charge-1"}]
    if called_again:
        calls.append({"phase": "recover", "call_id": "charge-1"})
    write(directory, CALLS_LOG, *calls)
    for run in runs:
        write(directory, TOOLS_LOG, {k: run[k] for k in ("phase", "call_id", "key")})
        write(directory, PROCESSOR_LOG, {**run, "amount": 1})


def effect(state: str, key: str = KEY, output: Any = None) -> dict[str, Any]:
    return {"key": key, "call_id": "charge-1", "state": state, "attempts": 1, "output": output}


def recovery(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    *,
    outcome: str = "completed",
    reason: str | None = None,
) -> dict[str, Any]:
    return {
        "outcome": outcome,
        "detail": "",
        "reason": reason,
        "pending_before": 0,
        "pending_items": [],
        "history_before": ["user:buy 1", "call:charge-1"],
        "model_calls": 0 if outcome == "denied" else 1,
        "decisions": [],
        "effects_before": before,
        "effects": after,
    }


DONE = effect("done", output=charged(1))
FINISHED = ["user:buy 1", "call:charge-1", "output:charge-1", "assistant:done 1"]


def judged(directory: Path, found: dict[str, Any], stored: list[str]) -> Verdict:
    cell = Cell("sqlite", RecoveryPath.RESUME_RUN, CrashPoint.BEFORE_RECEIPT, "tool_output", 1)
    verdict = Verdict(cell, killed=True)
    judge(verdict, found, stored, directory)
    return verdict


def test_the_judge_passes_an_effect_settled_by_check(tmp_path: Path) -> None:
    evidence(tmp_path, run_of("crash"))
    write(tmp_path, CHECKS_LOG, {"phase": "recover", "key": KEY, "found": True})
    verdict = judged(tmp_path, recovery([effect("started")], [DONE]), FINISHED)
    assert verdict.holds, verdict.problems
    assert verdict.outcome == "settled by check"


def test_the_judge_counts_a_body_run_again_on_a_known_charge(tmp_path: Path) -> None:
    # What a plain function tool did: run again on resuming; the processor deduped it.
    evidence(tmp_path, run_of("crash"), run_of("recover", charged_now=False))
    verdict = judged(tmp_path, recovery([effect("started")], [DONE]), FINISHED)
    assert verdict.effects_run_twice == 1
    assert not verdict.holds


def test_the_judge_counts_one_call_charged_under_two_keys(tmp_path: Path) -> None:
    evidence(tmp_path, run_of("crash"), run_of("recover", OTHER_KEY))
    other = effect("done", OTHER_KEY, charged(1))
    verdict = judged(tmp_path, recovery([effect("started")], [effect("started"), other]), FINISHED)
    assert verdict.effects_run_twice == 1
    assert not verdict.holds


def test_the_judge_counts_an_unrecorded_rerun_as_broken(tmp_path: Path) -> None:
    # Two runs of the body, and no intent for either in the journal.
    evidence(tmp_path, run_of("crash"), run_of("recover", charged_now=False))
    verdict = judged(tmp_path, recovery([], [DONE]), FINISHED)
    assert verdict.unrecorded_reruns == 1
    assert not any("no intent" in problem for problem in verdict.problems)
    assert not verdict.holds


def test_the_judge_wants_an_intent_per_charge_and_a_receipt_per_output(tmp_path: Path) -> None:
    evidence(tmp_path, run_of("crash"))
    verdict = judged(tmp_path, recovery([], []), FINISHED)
    assert any("no intent in the journal" in problem for problem in verdict.problems)
    assert any("no receipt" in problem for problem in verdict.problems)
    assert not verdict.holds


def test_the_judge_wants_the_receipt_to_be_the_charge(tmp_path: Path) -> None:
    evidence(tmp_path, run_of("crash"))
    wrong = effect("done", output=charged(2))
    verdict = judged(tmp_path, recovery([effect("started")], [wrong]), FINISHED)
    assert any("is not the processor's charge" in p for p in verdict.problems)
    assert not verdict.holds


CHECKPOINTED = ["user:buy 1", "call:charge-1"]


def checkpoint(directory: Path) -> None:
    """The checkpoint's history as the store holds it: resuming it is not stale."""
    (directory / "checkpoint.json").write_bytes(orjson.dumps({"history": CHECKPOINTED}))


def test_an_unknown_effect_must_be_settled_or_refused(tmp_path: Path) -> None:
    evidence(tmp_path, run_of("crash"))
    checkpoint(tmp_path)
    # The recovery called the tool again and went on, the effect still without a receipt.
    went_on = judged(tmp_path, recovery([effect("started")], [effect("started")]), FINISHED)
    assert any("unknown outcome" in problem for problem in went_on.problems)
    assert not went_on.holds
    # Refused instead (effect_unknown), the history as it was: a promise kept.
    refused = recovery(
        [effect("started")], [effect("started")], outcome="denied", reason="effect_unknown"
    )
    verdict = judged(tmp_path, refused, CHECKPOINTED)
    assert verdict.holds, verdict.problems
    assert verdict.outcome == "denied: effect_unknown"


def test_a_refusal_with_no_unknown_effect_is_a_false_denial(tmp_path: Path) -> None:
    evidence(tmp_path, run_of("crash"), called_again=False)
    checkpoint(tmp_path)
    refused = recovery([DONE], [DONE], outcome="denied", reason="effect_unknown")
    verdict = judged(tmp_path, refused, CHECKPOINTED)
    assert verdict.false_denials == 1
    assert not verdict.holds
