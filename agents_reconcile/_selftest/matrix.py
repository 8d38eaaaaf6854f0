"""The crash-point matrix: which cells exist, how one runs, and how it is judged.

A cell is (store, path, crash point, the append it stops, and whether another writer appends
before the recovery). Its first process is killed with SIGKILL at the crash point; its second
recovers on the same files. The judge then reads the store afresh and checks the promises:

- no item appears twice, and no item the session acknowledged to the SDK is missing;
- a tool call and its output are both stored or both absent;
- no tool runs again once its output is stored, and none runs again unrecorded (the tool is
  an effect tool: its intent is durable before its body runs);
- no effect runs twice: the processor never charges an idempotency key twice nor one call
  under two keys, and no body runs for a key the processor already charged; every charge
  has its intent in the journal, every receipt is the processor's charge, and every stored
  tool output has its receipt; an effect whose outcome the crash left unknown is settled by
  the tool's ``check`` or refused (``effect_unknown``), never charged again;
- where the recovery met an intent it could not vouch for (another writer came between),
  it was denied before any model call and left the history as it found it; where nothing was
  in doubt, it was not denied.

Processes are forked from a server that imported the SDK once (``zygote.py``), so a cell
costs about as much as the conversation it runs.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from .._core.crashpoints import CrashPoint
from ..testing import Fault
from .scenario import (
    CALLS_LOG,
    CHECKS_LOG,
    PROCESSOR_LOG,
    SESSION_ID,
    TOOLS_LOG,
    Job,
    Phase,
    RecoveryPath,
    charged,
    item_name,
    read_log,
)
from .stores import close_store, store_named

__all__ = [
    "APPEND_POINTS",
    "EFFECT_POINTS",
    "RECONCILE_FAULTS",
    "Cell",
    "Verdict",
    "boundaries",
    "cells",
    "effect_promises",
    "judge",
    "run_cell",
    "run_cells",
    "stop_servers",
]

APPEND_POINTS: Final = (
    CrashPoint.BEFORE_INTENT_RECORDED,
    CrashPoint.AFTER_INTENT_RECORDED,
    CrashPoint.INSIDE_APPEND_BEFORE_COMMIT,
    CrashPoint.AFTER_COMMIT_BEFORE_ACK,
    CrashPoint.BEFORE_INTENT_CLEARED,
    CrashPoint.BEFORE_CLEARING,
)
"""Points an append passes; the cell stops one append there (its clearing included, folded
into the next append's opening or in the background)."""
RECONCILE_FAULTS: Final = {
    CrashPoint.DURING_RECONCILE_READ: Fault.LOST_ACK,
    CrashPoint.BEFORE_SETTLE: Fault.LOST_ACK,
    CrashPoint.BEFORE_REPLAY: Fault.REJECT,
    CrashPoint.AFTER_REPLAY: Fault.REJECT,
}
"""Points a recovery passes, and the failed append that makes a recovery pass them."""
EFFECT_POINTS: Final = (
    CrashPoint.BEFORE_EFFECT_INTENT,
    CrashPoint.BEFORE_EFFECT,
    CrashPoint.BEFORE_RECEIPT,
    CrashPoint.AFTER_RECEIPT,
)
"""Points the effect tool passes; the cell stops its first call there, in the turn that runs
it (a fresh run's tool turn, a resumed checkpoint's approved tool), so the crash is in the
append that would hold the tool's output."""
PROCESS_TIMEOUT: Final = 120.0


@dataclass(frozen=True)
class Cell:
    store: str
    path: RecoveryPath
    point: CrashPoint
    boundary: str
    """Which append the crash (or the fault before it) hits: ``input``, ``tool_turn``, ..."""
    at: int
    """Stop at the ``at``-th time the point is reached: the number of the append it hits (an
    effect point: of the tool call, always the first)."""
    foreign: bool = False
    keyed: bool = False
    """(Effect points) the tool has its own key, the order's (``effect_tool(key=...)``)."""

    @property
    def fault(self) -> Fault | None:
        return RECONCILE_FAULTS.get(self.point)

    @property
    def row(self) -> str:
        return f"{self.point.value} @ {self.boundary}{' (own key)' if self.keyed else ''}"

    def job(self, directory: Path, phase: Phase) -> Job:
        return Job(
            directory=str(directory),
            store=self.store,
            path=self.path,
            phase=phase,
            point=self.point,
            at=self.at,
            fault=self.fault,
            foreign=self.foreign,
            keyed=self.keyed,
        )


@dataclass
class Verdict:
    """What happened in one cell, and every broken promise counted."""

    cell: Cell
    killed: bool = False
    outcome: str = ""
    duplicates: int = 0
    losses: int = 0
    unpaired: int = 0
    continued_on_ambiguity: int = 0
    false_denials: int = 0
    reexecuted: int = 0
    """Tools run again although their output was stored or held by a pending intent."""
    unrecorded_reruns: int = 0
    """Tools run again whose first run the crash left no record of (no output, no pending
    intent, no effect intent): an effect tool's intent records every run of its body."""
    effects_run_twice: int = 0
    """Charges the processor took twice for one key or one call, and bodies run for a key
    the processor already held a charge for."""
    problems: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        """Every promise kept."""
        return not (
            self.problems
            or self.duplicates
            or self.losses
            or self.unpaired
            or self.continued_on_ambiguity
            or self.false_denials
            or self.reexecuted
            or self.unrecorded_reruns
            or self.effects_run_twice
        )


# -- which cells ------------------------------------------------------------------------------


def _boundary_name(names: Sequence[str]) -> str:
    kinds = []
    if any(name.startswith("user:") for name in names):
        kinds.append("input")
    calls = any(name.startswith("call:") for name in names)
    outputs = any(name.startswith("output:") for name in names)
    if calls and outputs:
        kinds.append("tool_turn")
    elif calls:
        kinds.append("tool_call")
    elif outputs:
        kinds.append("tool_output")
    if any(name.startswith("assistant:") for name in names):
        kinds.append("final")
    return "+".join(kinds) or "empty"


def boundaries(store: str, path: RecoveryPath, *, workdir: Path) -> list[str]:
    """Run the conversation once without a crash; name each append made after arming."""
    directory = Path(tempfile.mkdtemp(prefix=f"probe-{store}-{path.value}-", dir=workdir))
    job = Job(directory=str(directory), store=store, path=path, phase=Phase.PROBE)
    code = _spawn(job)
    if code != 0:
        raise RuntimeError(f"the probe run on {store}/{path.value} failed ({code}): " + _tail(job))
    batches = []
    armed = False
    for record in _records(directory / "acks.log"):
        if record.get("armed"):
            armed = True
        elif armed:
            batches.append(_boundary_name(record["items"]))
    shutil.rmtree(directory, ignore_errors=True)
    return batches


def cells(
    stores: Iterable[str],
    paths: Iterable[RecoveryPath],
    *,
    workdir: Path,
    foreign: Iterable[bool] = (False, True),
) -> list[Cell]:
    """Every crash point at every append of every path, and every effect point in the tool
    call of every path (with the per-call key, and again with the tool's own key, without
    another writer), over the given stores."""
    result = []
    interference = list(foreign)
    for store in stores:
        for path in paths:
            named = boundaries(store, path, workdir=workdir)
            for at, boundary in enumerate(named, start=1):
                for point in (*APPEND_POINTS, *RECONCILE_FAULTS):
                    for other in interference:
                        result.append(Cell(store, path, point, boundary, at, other))
            tool_turn = next(name for name in named if "tool_" in name)
            for point in EFFECT_POINTS:
                for other in interference:
                    result.append(Cell(store, path, point, tool_turn, 1, other))
                result.append(Cell(store, path, point, tool_turn, 1, keyed=True))
    return result


# -- running ----------------------------------------------------------------------------------


class _Zygote:
    """A fork server (``zygote.py``) that imported the SDK once; one per concurrent job."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agents_reconcile._selftest.zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def run(self, job: Job) -> int | None:
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"job": job.to_json(), "timeout": PROCESS_TIMEOUT}
        self.process.stdin.write(orjson.dumps(request) + b"\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        if not reply:
            raise RuntimeError(f"the fork server stopped (exit code {self.process.wait()})")
        code: int | None = orjson.loads(reply)["code"]
        return code

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


_pool_lock = threading.Lock()
_idle: list[_Zygote] = []
_started: list[_Zygote] = []


def _spawn(job: Job) -> int | None:
    """Run one job in a child process; its exit code (negative: killed by that signal), or
    None when it did not finish in time (it is then killed)."""
    with _pool_lock:
        zygote = _idle.pop() if _idle else None
    if zygote is None:
        zygote = _Zygote()
        with _pool_lock:
            _started.append(zygote)
    code = zygote.run(job)
    with _pool_lock:
        _idle.append(zygote)
    return code


def stop_servers() -> None:
    """Stop the fork servers this process started."""
    with _pool_lock:
        started = list(_started)
        _started.clear()
        _idle.clear()
    for zygote in started:
        zygote.stop()


def _tail(job: Job) -> str:
    log = Path(job.directory) / f"stderr-{job.phase.value}.log"
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no output"
    return lines[-1] if lines else "no output"


def _records(log: Path) -> Iterator[dict[str, Any]]:
    return read_log(log)


async def _stored(store: str, directory: Path) -> list[str]:
    session = await store_named(store).open(SESSION_ID, directory)
    try:
        return [item_name(item) for item in await session.get_items()]
    finally:
        await close_store(session, drop=True)


def run_cell(cell: Cell, directory: Path) -> Verdict:
    """Kill, recover, judge."""
    verdict = Verdict(cell)
    crash = cell.job(directory, Phase.CRASH)
    code = _spawn(crash)
    verdict.killed = code == -9
    if not verdict.killed:
        verdict.outcome = "not reached"
        verdict.problems.append(f"the crash process ended with {code}: {_tail(crash)}")
        return verdict
    recover = cell.job(directory, Phase.RECOVER)
    code = _spawn(recover)
    if code != 0:
        verdict.outcome = "error"
        verdict.problems.append(f"the recovery process ended with {code}: {_tail(recover)}")
        return verdict
    recovery = orjson.loads((directory / "recovery.json").read_bytes())
    stored = asyncio.run(_stored(cell.store, directory))
    judge(verdict, recovery, stored, directory)
    return verdict


def judge(verdict: Verdict, recovery: dict[str, Any], stored: list[str], directory: Path) -> None:
    """Fill ``verdict`` from a cell's evidence: ``recovery`` (the recovering process's
    ``recovery.json``), ``stored`` (the history the store holds afterwards, by item name) and
    the logs in ``directory``."""
    cell = verdict.cell
    verdict.outcome = _outcome(recovery)
    note = _judge_effects(verdict, recovery, stored, directory)
    if note:
        verdict.outcome = note if verdict.outcome == "clean" else f"{verdict.outcome}, {note}"
    verdict.duplicates = sum(count - 1 for count in Counter(stored).values())
    acknowledged = {
        name for record in _records(directory / "acks.log") for name in record.get("items", ())
    }
    verdict.losses = len(acknowledged - set(stored))
    calls = {name.removeprefix("call:") for name in stored if name.startswith("call:")}
    outputs = {name.removeprefix("output:") for name in stored if name.startswith("output:")}
    if recovery["outcome"] == "completed":
        # A call waits for its output while its approval is pending, and a denied recovery
        # leaves the history as it found it; a finished conversation must have both.
        verdict.unpaired = len(calls ^ outputs)
    runs = Counter(record["call_id"] for record in _records(directory / TOOLS_LOG))
    recorded = {*recovery["history_before"], *recovery["pending_items"]}
    intents = {effect["call_id"] for effect in recovery["effects_before"]}
    for call_id, count in runs.items():
        if f"output:{call_id}" in recorded:
            verdict.reexecuted += count - 1
        elif call_id not in intents:
            verdict.unrecorded_reruns += count - 1
        # A run again under a recorded intent is judged by its charges (_judge_effects).
    if recovery["outcome"] == "error":
        verdict.problems.append(f"recovery failed: {recovery['detail']}")
    denied = recovery["outcome"] == "denied"
    refused_effect = denied and recovery["reason"] == "effect_unknown"
    # Must be denied: an intent that another writer came after. May be denied: a RunState
    # checkpoint older than the history (resuming it would act on a history it has not
    # seen). May be refused (effect_unknown): a tool call whose effect the crash left
    # without a receipt. A denial comes before any model call and leaves the history as it was.
    # A revisioned store proves whether the pending write landed; a write that landed under
    # another writer's append is then no doubt at all, only one that did not land is.
    landed = set(recovery["pending_items"]) <= set(recovery["history_before"])
    revisioned = store_named(cell.store).revisioned
    in_doubt = cell.foreign and recovery["pending_before"] > 0 and not (revisioned and landed)
    stale = cell.path.resumes and _checkpoint_history(directory) != stored
    # Settling the pending intent (a replay) may come before the denial; nothing else may.
    settled = recovery["history_before"] + recovery["pending_items"]
    untouched = recovery["model_calls"] == 0 and stored in (recovery["history_before"], settled)
    if (in_doubt and not denied) or (denied and not untouched):
        verdict.continued_on_ambiguity = 1
    if denied and not (
        in_doubt or stale or (refused_effect and _unknown_effects(recovery, directory))
    ):
        verdict.false_denials = 1
        verdict.problems.append(f"denied with nothing in doubt: {recovery['detail']}")


def _judge_effects(
    verdict: Verdict, recovery: dict[str, Any], stored: list[str], directory: Path
) -> str:
    """Count the effects run twice and note every other broken effect promise; return what
    the recovery did about an effect the crash left behind, for the cell's outcome."""
    verdict.effects_run_twice, problems, note = effect_promises(recovery, stored, directory)
    verdict.problems.extend(problems)
    return note


def effect_promises(
    recovery: dict[str, Any], stored: list[str], directory: Path
) -> tuple[int, list[str], str]:
    """The effects run twice, every other broken effect promise, and what the recovery did
    about an effect the crash left behind, from ``recovery`` (its ``outcome``, ``reason``,
    ``effects_before`` and ``effects``), the history ``stored`` and the logs in ``directory``
    (the recovering requests' records are those of ``Phase.RECOVER``)."""
    problems: list[str] = []
    requests = list(_records(directory / PROCESSOR_LOG))
    charges = [request for request in requests if request["charged"]]
    per_key = Counter(charge["key"] for charge in charges)
    keys_per_call: dict[str, set[str]] = defaultdict(set)
    for charge in charges:
        keys_per_call[charge["call_id"]].add(charge["key"])
    twice = (
        sum(count - 1 for count in per_key.values())  # the processor charged a key twice
        + sum(len(keys) - 1 for keys in keys_per_call.values())  # one call, two keys
        + sum(not request["charged"] for request in requests)  # a body run on a known charge
    )
    bodies = list(_records(directory / TOOLS_LOG))
    if len(bodies) != len(requests):
        problems.append(f"{len(bodies)} runs of the tool's body, {len(requests)} charge requests")
    amounts = {charge["key"]: charge["amount"] for charge in charges}
    effects = {effect["key"]: effect for effect in recovery["effects"]}
    for key in sorted(amounts.keys() - effects.keys()):
        problems.append(f"charged under key {key[:12]} with no intent in the journal")
    receipts = set()
    for key, effect in effects.items():
        if effect["state"] != "done":
            continue
        receipts.add(effect["call_id"])
        if key not in amounts:
            problems.append(f"a receipt for {effect['call_id']} with no charge")
        elif effect["output"] != charged(amounts[key]):
            problems.append(
                f"the receipt for {effect['call_id']} ({effect['output']!r}) is not the "
                f"processor's charge ({charged(amounts[key])!r})"
            )
    for name in stored:
        if name.startswith("output:") and name.removeprefix("output:") not in receipts:
            problems.append(f"{name} is stored with no receipt for it")
    # An effect the crash left without a receipt, called again: settled or refused.
    refused = recovery["outcome"] == "denied" and recovery["reason"] == "effect_unknown"
    for effect in _unknown_effects(recovery, directory):
        now = effects.get(effect["key"], effect)
        if not refused and not (now["state"] == "done" and per_key[effect["key"]] == 1):
            problems.append(
                f"the effect of {effect['call_id']} was of unknown outcome, and the recovery "
                "went on without settling or refusing it"
            )
    return twice, problems, _effect_note(recovery, directory)


def _unknown_effects(recovery: dict[str, Any], directory: Path) -> list[dict[str, Any]]:
    """Effects the crash left without a receipt that the recovery called the tool for."""
    called = _recovering(directory / CALLS_LOG)
    return [
        effect
        for effect in recovery["effects_before"]
        if effect["state"] == "started" and effect["call_id"] in {c["call_id"] for c in called}
    ]


def _recovering(log: Path) -> list[dict[str, Any]]:
    return [record for record in _records(log) if record["phase"] == Phase.RECOVER.value]


def _effect_note(recovery: dict[str, Any], directory: Path) -> str:
    """How the recovery answered a call of the tool whose effect it found in the journal."""
    checks = _recovering(directory / CHECKS_LOG)
    if any(check["found"] for check in checks):
        return "settled by check"
    if checks:
        return "charged after check"
    called = {record["call_id"] for record in _recovering(directory / CALLS_LOG)}
    ran = {record["call_id"] for record in _recovering(directory / TOOLS_LOG)}
    done = {e["call_id"] for e in recovery["effects_before"] if e["state"] == "done"}
    if (called & done) - ran:
        return "receipt"
    return ""


def _checkpoint_history(directory: Path) -> list[str] | None:
    try:
        saved: list[str] = orjson.loads((directory / "checkpoint.json").read_bytes())["history"]
    except FileNotFoundError:
        return None
    return saved


def _outcome(recovery: dict[str, Any]) -> str:
    if recovery["outcome"] == "denied":
        return f"denied: {recovery['reason']}"
    if recovery["outcome"] != "completed":
        return str(recovery["outcome"])
    actions = {action for _, action in recovery["decisions"]}
    outcomes = {outcome for outcome, _ in recovery["decisions"]}
    if "replayed" in actions:
        return "replayed"
    if "committed" in outcomes:
        return "committed"
    return "clean"


def run_cells(
    selected: Sequence[Cell],
    *,
    workdir: Path,
    workers: int = 2,
    progress: Callable[[Verdict], None] | None = None,
) -> list[Verdict]:
    """Run cells, ``workers`` at a time, each in its own directory under ``workdir``."""

    def one(indexed: tuple[int, Cell]) -> Verdict:
        index, cell = indexed
        directory = workdir / f"cell-{index:04d}"
        directory.mkdir(parents=True, exist_ok=True)
        verdict = run_cell(cell, directory)
        if progress is not None:
            progress(verdict)
        return verdict

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, enumerate(selected)))
