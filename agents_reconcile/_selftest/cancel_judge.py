"""How a cancellation-matrix cell is judged, from the evidence its two sides left.

A side is one run of the cell's script: the wrapped session (``ReconcilingSession`` with the
effect tool) or its bare twin (the unwrapped store, a plain ``function_tool`` charging the same
kind of processor, the same cancellation at the corresponding moment). Each leaves its logs in a
directory of its own (``scenario.py``'s ``acks.log``, ``processor.log``, ...) and a ``Side``:
how its requests ended, the history before and after the continuation, the journal's
unresolved intents and effects afterwards, and what the process held then.

The wrapped side must keep the crash matrix's promises (no item stored twice, nothing
acknowledged lost, calls and outputs paired, no effect run twice, no continuation on doubt, no
denial where nothing was in doubt), and two more:

- *worse than bare*: an item the wrapped history holds twice (or lost after acknowledging it)
  where the bare twin's does not, or a charge more than the bare twin took;
- *left for nobody*: an intent in flight or reconciling under this live process that no task
  of the process holds (``PROCESS_IN_FLIGHT.busy``), or an effect started under this live
  process that no task holds (``_effects.holds.running``) and that has no receipt; with no task
  alive on the loop at all, what those registries name counts as held by nobody too.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .._core.ownership import Owner
from .matrix import effect_promises
from .scenario import PROCESSOR_LOG, read_log

__all__ = ["PROMISES", "CancelVerdict", "IntentRow", "Side", "Step", "judge", "left_for_nobody"]

_ACTIVE = ("in_flight", "reconciling")
_ENDED = ("completed", "interrupted")
"""How a continuation's request may end (the resume path's next input asks for approval)."""


PROMISES: Final = (
    "duplicates",
    "losses",
    "unpaired",
    "continued_on_ambiguity",
    "false_denials",
    "effects_run_twice",
    "worse_than_bare",
    "left_for_nobody",
)
"""The counts of a verdict that are broken promises (each must be 0)."""


@dataclass(frozen=True)
class IntentRow:
    """An unresolved intent as the journal holds it."""

    intent_id: str
    state: str
    owner: str


@dataclass
class Step:
    """One request of the continuation, and the history around it."""

    name: str
    """``resume`` (the saved checkpoint) or ``fresh`` (the next input)."""
    outcome: str
    history_before: list[str]
    history_after: list[str]
    pending_items: list[str] = field(default_factory=list)
    """The items of the intents pending before it (a replay may add them before a denial)."""
    model_calls: int = 0

    @property
    def denied(self) -> bool:
        return self.outcome.startswith("denied")

    @property
    def reason(self) -> str | None:
        return self.outcome.removeprefix("denied: ") if self.denied else None


@dataclass
class Side:
    """What one side of a cell left."""

    directory: Path
    cancelled: str = ""
    """How the cancelled request ended (``cancel_modes.describe``)."""
    fired: bool = False
    """Whether the cancellation was triggered (the point was reached)."""
    checkpoint: list[str] | None = None
    """The history when the RunState checkpoint was saved (resume paths)."""
    steps: list[Step] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)
    """The history at the end."""
    effects_before: list[dict[str, Any]] = field(default_factory=list)
    effects: list[dict[str, Any]] = field(default_factory=list)
    """The journal's effects before the continuation and at the end (with their owner)."""
    intents: list[IntentRow] = field(default_factory=list)
    """The journal's unresolved intents at the end."""
    busy: frozenset[str] = frozenset()
    running: frozenset[str] = frozenset()
    """What the process's registries held at the end: intent ids, and effect keys."""
    tasks: int = 1
    """The tasks alive on the loop at the end, besides the judge's own: with none, a registry
    that names an intent or a key held is wrong (nothing of the process works on it)."""
    me: str = ""
    """This process, as the journal writes its owner."""
    decisions: list[str] = field(default_factory=list)
    """What the wrapped session decided about pending intents, oldest first."""
    problems: list[str] = field(default_factory=list)

    def acknowledged(self) -> set[str]:
        return {
            name
            for record in read_log(self.directory / "acks.log")
            for name in record.get("items", ())
        }

    def charges(self) -> int:
        return sum(bool(r["charged"]) for r in read_log(self.directory / PROCESSOR_LOG))


@dataclass
class CancelVerdict:
    """Every broken promise of one cell, counted."""

    cell: Any
    """The ``cancellation.Cell`` judged."""
    outcome: str = ""
    """How the cancelled request ended, and each request of the continuation."""
    continuation: str = ""
    """How the continuation went, in short (what the outcome table shows)."""
    duplicates: int = 0
    losses: int = 0
    unpaired: int = 0
    continued_on_ambiguity: int = 0
    false_denials: int = 0
    effects_run_twice: int = 0
    worse_than_bare: int = 0
    left_for_nobody: int = 0
    bare_duplicates: int = 0
    bare_extra_charges: int = 0
    """The bare twin's items stored twice, and its charges beyond the wrapped side's (shown
    beside the counts, not promises)."""
    not_reached: bool = False
    """The cancellation was never triggered (reported, not a broken promise)."""
    problems: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return not self.problems and not any(getattr(self, name) for name in PROMISES)


def _mine(owner: str, me: str) -> bool:
    """Whether ``owner`` (as the journal holds it) is this process (``me``), lease aside."""
    try:
        theirs, ours = Owner.parse(owner), Owner.parse(me)
    except (TypeError, ValueError):
        return False  # ENDED_OWNER, NEVER_STARTED_OWNER: nobody
    return theirs == ours  # an owner's lease is not part of who it is


def left_for_nobody(side: Side) -> list[str]:
    """What the journal shows held by this live process that nothing of it holds."""
    busy = side.busy if side.tasks else frozenset()
    running = side.running if side.tasks else frozenset()
    left = [
        f"intent {row.intent_id[:12]} {row.state} under this process, held by no task"
        + ("" if row.intent_id not in side.busy else " (named busy, and no task runs)")
        for row in side.intents
        if row.state in _ACTIVE and _mine(row.owner, side.me) and row.intent_id not in busy
    ]
    left += [
        f"effect {effect['call_id']} started under this process, held by no task, no receipt"
        for effect in side.effects
        if effect["state"] == "started"
        and _mine(effect["owner"], side.me)
        and effect["key"] not in running
        and effect["output"] is None
    ]
    return left


def worse_than_bare(wrapped: Side, bare: Side) -> list[str]:
    """Where the wrapped side did worse than its bare twin (one line per count)."""
    worse = []
    ours, theirs = Counter(wrapped.stored), Counter(bare.stored)
    for name, count in ours.items():
        if count > 1 and count > theirs[name]:
            worse += [f"{name} stored {count} times, bare {theirs[name]}"] * (
                count - max(theirs[name], 1)
            )
    lost = wrapped.acknowledged() - set(wrapped.stored)
    bare_lost = bare.acknowledged() - set(bare.stored)
    worse += [f"{name} acknowledged and lost, not so bare" for name in sorted(lost - bare_lost)]
    extra = wrapped.charges() - bare.charges()
    worse += [f"{wrapped.charges()} charges, bare {bare.charges()}"] * max(extra, 0)
    return worse


def _short(side: Side) -> str:
    """The continuation in a few words: the first request's outcome (a resume's, on the resume
    path; the next input's after it only when that did not go through), and the decisions
    about pending intents."""
    if not side.steps:
        return side.cancelled
    first, *rest = side.steps
    text = first.outcome if first.name == "fresh" else f"resume {first.outcome}"
    text += "".join(f", then {step.outcome}" for step in rest if step.outcome not in _ENDED)
    settled = sorted(set(side.decisions) - {"denied"})
    return f"{text} [{', '.join(settled)}]" if settled else text


def _recovery(side: Side) -> dict[str, Any]:
    """What ``matrix.effect_promises`` reads, from the continuation's first request."""
    first = side.steps[0]
    return {
        "outcome": "denied" if first.denied else first.outcome,
        "reason": first.reason,
        "effects_before": side.effects_before,
        "effects": side.effects,
    }


def judge(verdict: CancelVerdict, wrapped: Side, bare: Side | None) -> None:
    """Fill ``verdict`` from the wrapped side's evidence, and its bare twin's."""
    verdict.problems.extend(wrapped.problems)
    verdict.not_reached = not wrapped.fired
    stored = wrapped.stored
    verdict.outcome = f"{wrapped.cancelled}; " + ", ".join(
        f"{step.name} {step.outcome}" for step in wrapped.steps
    )
    verdict.continuation = _short(wrapped)
    if wrapped.decisions:
        verdict.outcome += f" ({', '.join(sorted(set(wrapped.decisions)))})"
    verdict.duplicates = sum(count - 1 for count in Counter(stored).values())
    verdict.losses = len(wrapped.acknowledged() - set(stored))
    last = wrapped.steps[-1] if wrapped.steps else None
    if last is not None and last.outcome in _ENDED:
        calls = {name.removeprefix("call:") for name in stored if name.startswith("call:")}
        outputs = {n.removeprefix("output:") for n in stored if n.startswith("output:")}
        # A call the last request stopped at for its approval waits for its output.
        waiting = {
            name.removeprefix("call:")
            for name in set(last.history_after) - set(last.history_before)
            if name.startswith("call:") and last.outcome == "interrupted"
        }
        unpaired = sorted((calls ^ outputs) - waiting)
        verdict.unpaired = len(unpaired)
        verdict.problems += [f"{call_id}: its call or its output alone" for call_id in unpaired]
    # An effect the cancellation left without a receipt is in doubt: refusing it is no lie.
    unknown = [e for e in wrapped.effects_before if e["state"] == "started" and not e["output"]]
    if wrapped.steps:
        twice, problems, _ = effect_promises(_recovery(wrapped), stored, wrapped.directory)
        verdict.effects_run_twice = twice
        verdict.problems.extend(problems)
    for step in wrapped.steps:
        # A checkpoint the history moved past (before the request, or once the request had
        # settled what was pending) is in doubt: resuming it would act on a history it has
        # not seen. Nothing else is, here: no other writer comes between.
        moved = step.name == "resume" and wrapped.checkpoint != step.history_before
        stale = moved or (step.name == "resume" and wrapped.checkpoint != step.history_after)
        refused = step.reason == "effect_unknown" and bool(unknown)
        settled = step.history_before + step.pending_items
        untouched = step.model_calls == 0 and step.history_after in (
            step.history_before,
            settled,
        )
        if step.denied and not untouched:
            verdict.continued_on_ambiguity += 1
            verdict.problems.append(f"{step.name}: {step.outcome} after going on")
        elif moved and not step.denied:
            verdict.continued_on_ambiguity += 1
            verdict.problems.append(f"{step.name}: {step.outcome} on a stale checkpoint")
        if step.denied and not (stale or refused):
            verdict.false_denials += 1
            verdict.problems.append(f"{step.name}: {step.outcome} with nothing in doubt")
        elif not step.denied and step.outcome not in _ENDED:
            verdict.problems.append(f"{step.name}: {step.outcome}")
    left = left_for_nobody(wrapped)
    verdict.left_for_nobody = len(left)
    verdict.problems.extend(left)
    if bare is not None:
        verdict.bare_duplicates = sum(count - 1 for count in Counter(bare.stored).values())
        verdict.bare_extra_charges = max(bare.charges() - wrapped.charges(), 0)
        worse = worse_than_bare(wrapped, bare)
        verdict.worse_than_bare = len(worse)
        verdict.problems.extend(worse)
