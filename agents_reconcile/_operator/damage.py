"""Damage in a stored conversation history, and the repair its evidence allows. Pure: no I/O.

The items are the SDK's input items as sessions store them; ``Kind`` says what is looked for.
Findings and plans name positions, digests (``fingerprint.item_digest``), item types and call
ids, never an item's content.
"""

from __future__ import annotations

import enum
import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .._core.fingerprint import canonical_item, digest_items

__all__ = ["CALL_OUTPUT_TYPES", "Damage", "Finding", "Kind", "Left", "Removal", "RepairPlan"]
__all__ += ["find_damage", "plan_repair"]

CALL_OUTPUT_TYPES: Final = {
    "program": "program_output",
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "tool_search_call": "tool_search_output",
}
"""Each call type and the output type that answers it: the SDK's own pairing
(``_TOOL_CALL_TO_OUTPUT_TYPE``, agents/run_internal/items.py:30)."""
_CALL_OF_OUTPUT: Final = {output: call for call, output in CALL_OUTPUT_TYPES.items()}
# Hosted MCP approvals pair a request's id with the response's approval_request_id; the SDK
# pairs them outside the map above (agents/run_internal/session_persistence.py:1188).
_REQUEST: Final = "mcp_approval_request"
_RESPONSE: Final = "mcp_approval_response"
_FAKE_ID: Final = "__fake_id__"  # the SDK's placeholder id (agents/models/fake_id.py), shared
_MAX_RUN: Final = 256  # the longest batch looked for when a run repeats
_TYPE_WORD: Final = re.compile(r"[a-z_]{1,40}")


class Kind(enum.Enum):
    """What a finding is. Damage: a later identical copy of an item whose identity must be
    unique (the same ``call_id`` for a call or output type, else the same ``id``); a run stored
    again right after itself that holds such an item (a batch appended twice); an output whose
    call is stored nowhere; an output before its call; a call without an output, the
    conversation gone on past it; different items under one identity; a run stored twice with
    no item of unique identity. Not damage: a call of the last turn, which may still be
    answered (``OPEN_CALL``)."""

    DUPLICATE = "duplicate"
    REPEATED_BATCH = "repeated_batch"
    ORPHAN_OUTPUT = "orphan_output"
    OUTPUT_BEFORE_CALL = "output_before_call"
    ORPHAN_CALL = "orphan_call"
    IDENTITY_CONFLICT = "identity_conflict"
    REPEATED_RUN = "repeated_run"
    OPEN_CALL = "open_call"

    @property
    def damage(self) -> bool:
        return self is not Kind.OPEN_CALL


_REMOVED_WHY: Final = {
    Kind.DUPLICATE: "An identical copy of this item, whose identity must be unique, is stored "
    "earlier: this later copy adds nothing.",
    Kind.REPEATED_BATCH: "These items repeat the run stored right before them, which holds items "
    "of unique identity: the batch was appended twice and this is its second copy.",
    Kind.ORPHAN_OUTPUT: "No call with this call_id is stored, so no model request can pair this "
    "output; the SDK drops such outputs itself when it reads a limited history.",
    Kind.ORPHAN_CALL: "No output for this call is stored and the conversation went on past it; "
    "the SDK leaves such calls, and the reasoning tied to them, out of every model input it "
    "builds from a session, so removing them changes nothing a model sees.",
}
_LEFT_WHY: Final = {
    Kind.OUTPUT_BEFORE_CALL: "The call and its output are both stored, in the wrong order; "
    "where the output belongs cannot be proven from the history, so moving it is a person's "
    "decision.",
    Kind.IDENTITY_CONFLICT: "Different items carry one identity; which of them is right "
    "cannot be told from the history.",
    Kind.REPEATED_RUN: "The same items are stored twice in a row, but none carries an identity "
    "that must be unique: the repetition may be what was really said.",
    Kind.ORPHAN_CALL: "An approval request without a response, with later turns after it; the "
    "SDK does not drop these on its own, so removing one would not mirror the SDK.",
}


@dataclass(frozen=True)
class Finding:
    """One piece of damage (or an open call): where it is, never what it says. ``related``:
    the evidence beside it (a repeated run's first copy, the call an output comes before, the
    reasoning and program-issued items that go with an orphan call)."""

    kind: Kind
    positions: tuple[int, ...]
    digests: tuple[str, ...]
    item_type: str | None = None
    call_id: str | None = None
    related: tuple[int, ...] = ()
    related_digests: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": self.kind.value}
        for name in ("positions", "digests", "item_type", "call_id", "related", "related_digests"):
            value = getattr(self, name)
            if value or name in ("positions", "digests"):
                body[name] = list(value) if isinstance(value, tuple) else value
        return body


@dataclass(frozen=True)
class Damage:
    """What ``find_damage`` found in a history of ``count`` items (``digests``: every item's)."""

    count: int
    digests: tuple[str, ...]
    findings: tuple[Finding, ...]

    @property
    def damaged(self) -> bool:
        return any(finding.kind.damage for finding in self.findings)

    def to_json(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for finding in self.findings:
            kinds[finding.kind.value] = kinds.get(finding.kind.value, 0) + 1
        found = [finding.to_json() for finding in self.findings]
        return {"items": self.count, "damaged": self.damaged, "kinds": kinds, "findings": found}


@dataclass(frozen=True)
class Removal:
    """One position a repair removes, and why."""

    position: int
    digest: str
    kind: Kind

    def to_json(self) -> dict[str, Any]:
        why = _REMOVED_WHY[self.kind]
        return {
            "position": self.position,
            "digest": self.digest,
            "kind": self.kind.value,
            "why": why,
        }


@dataclass(frozen=True)
class Left:
    """Damage a repair leaves for a person, and why."""

    finding: Finding
    why: str

    def to_json(self) -> dict[str, Any]:
        return {**self.finding.to_json(), "why": self.why}


@dataclass(frozen=True)
class RepairPlan:
    """What a repair of a ``count``-item history removes, and what it leaves for a person."""

    count: int
    removals: tuple[Removal, ...]
    left: tuple[Left, ...]

    @property
    def positions(self) -> frozenset[int]:
        return frozenset(removal.position for removal in self.removals)

    def apply(self, items: Sequence[Any]) -> list[Any]:
        """``items`` (the history planned for) without the removed positions."""
        if len(items) != self.count:
            raise ValueError(f"the plan is for {self.count} items, not {len(items)}")
        gone = self.positions
        return [item for position, item in enumerate(items) if position not in gone]

    def to_json(self) -> dict[str, Any]:
        return {
            "items_before": self.count,
            "items_after": self.count - len(self.removals),
            "removals": [removal.to_json() for removal in self.removals],
            "left_for_person": [left.to_json() for left in self.left],
        }


@dataclass(frozen=True, slots=True)
class _View:
    """What the analysis reads of one item: its type and identities, never its content."""

    type: str
    identity: tuple[str, str, str] | None = None
    item_id: str | None = None
    call_id: str | None = None
    answers: str | None = None
    caller: str | None = None
    pending_shell: bool = False


def _view(item: Any) -> _View:
    body = canonical_item(item)
    if not isinstance(body, dict):
        return _View("other")
    kind = body.get("type")
    if body.get("role") is not None and kind in (None, "message"):
        kind = "message"
    kind = kind if isinstance(kind, str) and _TYPE_WORD.fullmatch(kind) else "other"

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) and value else None

    item_id, call_id = text(body.get("id")), text(body.get("call_id"))
    item_id = None if item_id == _FAKE_ID else item_id
    answers = text(body.get("approval_request_id")) if kind == _RESPONSE else None
    # The identities the SDK deduplicates by (_dedupe_key, agents/run_internal/items.py:721),
    # and the ids of messages too: the Responses API refuses two input items with one id.
    identity: tuple[str, str, str] | None = None
    if call_id and (kind in CALL_OUTPUT_TYPES or kind in _CALL_OF_OUTPUT):
        identity = ("call_id", kind, call_id)
    elif item_id:
        identity = ("id", kind, item_id)
    elif call_id:
        identity = ("call_id", kind, call_id)
    elif answers:
        identity = ("approval_request_id", kind, answers)
    caller = body.get("caller")
    owner = caller.get("caller_id") if isinstance(caller, dict) else None
    program = text(owner) if isinstance(caller, dict) and caller.get("type") == "program" else None
    pending = kind == "shell_call" and body.get("status") in (None, "in_progress")
    return _View(kind, identity, item_id, call_id, answers, program, pending)


def find_damage(items: Sequence[Any], *, ignore_ids: bool = False) -> Damage:
    """Every finding in ``items`` (a whole stored history, oldest first). ``ignore_ids``: the
    session's digests leave ``id`` out (``_ignore_ids_for_matching``)."""
    history = _History([_view(item) for item in items], digest_items(items, ignore_ids=ignore_ids))
    history.repeats()
    history.duplicates()
    history.pairing()
    order = list(Kind)
    found = sorted(history.found, key=lambda f: (f.positions[0], order.index(f.kind)))
    return Damage(len(items), history.digests, tuple(found))


def plan_repair(damage: Damage) -> RepairPlan:
    """Remove only what the evidence proves (a duplicate's later copies, a repeated batch's
    second copy, orphan outputs, orphan calls as the SDK drops them); leave the rest."""
    taken: dict[int, Kind] = {}
    left: list[Left] = []
    for finding in damage.findings:
        kind = finding.kind
        if kind is Kind.DUPLICATE:
            take = finding.positions[1:]
        elif kind in (Kind.REPEATED_BATCH, Kind.ORPHAN_OUTPUT):
            take = finding.positions
        elif kind is Kind.ORPHAN_CALL and finding.item_type != _REQUEST:
            take = finding.positions + finding.related
        else:
            if kind.damage:
                left.append(Left(finding, _LEFT_WHY[kind]))
            continue
        for position in take:
            taken.setdefault(position, kind)
    removals = (Removal(p, damage.digests[p], kind) for p, kind in sorted(taken.items()))
    return RepairPlan(damage.count, tuple(removals), tuple(left))


class _History:
    """One history under analysis: what is found, and the positions proven to go."""

    def __init__(self, views: list[_View], digests: tuple[str, ...]) -> None:
        self.views, self.digests = views, digests
        self.found: list[Finding] = []
        self.gone: set[int] = set()

    def add(
        self,
        kind: Kind,
        positions: Sequence[int],
        *,
        call_id: str | None = None,
        related: Sequence[int] = (),
        typed: bool = True,
    ) -> None:
        digests = self.digests
        self.found.append(
            Finding(
                kind,
                tuple(positions),
                tuple(digests[p] for p in positions),
                self.views[positions[0]].type if typed else None,
                call_id,
                tuple(related),
                tuple(digests[p] for p in related),
            )
        )

    def repeats(self) -> None:
        """Runs stored again right after themselves (the longest first, further copies too);
        the copies of a run holding an item of unique identity are proven, and go."""
        digests, count = self.digests, len(self.digests)
        where: dict[str, list[int]] = defaultdict(list)
        for position, digest in enumerate(digests):
            where[digest].append(position)
        start = 0
        while start < count:
            same = where[digests[start]]
            reach = min(start + _MAX_RUN, start + (count - start) // 2)
            candidates = reversed(same[: bisect_right(same, reach)])
            length = next(
                (
                    later - start
                    for later in candidates
                    if later > start and digests[start:later] == digests[later : 2 * later - start]
                ),
                0,
            )
            if not length:
                start += 1
                continue
            end = start + 2 * length
            while digests[end : end + length] == digests[start : start + length]:
                end += length
            first, copies = range(start, start + length), range(start + length, end)
            if any(self.views[p].identity is not None for p in first):
                self.add(Kind.REPEATED_BATCH, copies, related=first, typed=False)
                self.gone.update(copies)
            else:
                self.add(Kind.REPEATED_RUN, copies, related=first, typed=False)
            start = end

    def duplicates(self) -> None:
        """Items sharing an identity: later identical copies go; different items under one
        identity are a conflict."""
        groups: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        for position, view in enumerate(self.views):
            if view.identity is not None and position not in self.gone:
                groups[view.identity].append(position)
        for (name, _, value), positions in groups.items():
            by_digest: dict[str, list[int]] = defaultdict(list)
            for position in positions:
                by_digest[self.digests[position]].append(position)
            call_id = value if name == "call_id" else None
            for same in by_digest.values():
                if len(same) > 1:
                    self.add(Kind.DUPLICATE, same, call_id=call_id)
                    self.gone.update(same[1:])
            if len(by_digest) > 1:
                firsts = [same[0] for same in by_digest.values()]
                self.add(Kind.IDENTITY_CONFLICT, firsts, call_id=call_id)

    def pairing(self) -> None:
        """Calls and outputs among the items that stay: orphans either way, outputs before
        their calls, and the calls of the last turn, which are open."""
        views = self.views
        alive = [position for position in range(len(views)) if position not in self.gone]
        # The last turn: everything after the newest message may still be answered.
        last_turn = 1 + max((p for p in alive if views[p].type == "message"), default=-1)
        calls: dict[tuple[str, str | None], list[int]] = defaultdict(list)
        outputs: dict[tuple[str, str | None], list[int]] = defaultdict(list)
        waiting = 0
        for position in reversed(alive):
            view = views[position]
            if view.type in CALL_OUTPUT_TYPES and view.call_id:
                calls[(view.type, view.call_id)].insert(0, position)
            elif view.type in _CALL_OF_OUTPUT and view.call_id:
                outputs[(_CALL_OF_OUTPUT[view.type], view.call_id)].insert(0, position)
            elif view.type == _REQUEST and view.item_id:
                calls[(_REQUEST, view.item_id)].insert(0, position)
            elif view.type == _RESPONSE and view.answers:
                outputs[(_REQUEST, view.answers)].insert(0, position)
            elif view.type == "tool_search_output":
                waiting += 1
            elif view.type == "tool_search_call":
                # Anonymous searches pair with a later anonymous output, newest first, as the
                # SDK pairs them (_matched_anonymous_tool_search_call_indexes, items.py:1087).
                if waiting:
                    waiting -= 1
                else:
                    calls[(view.type, None)].insert(0, position)
        # An output whose call is absent cannot be paired by any model request. The SDK drops
        # such outputs itself only where a session limit may have cut their calls off
        # (items.py:291, asked for at session_persistence.py:499); from a whole history it
        # sends them on, and the request fails.
        for key, positions in outputs.items():
            made = calls.get(key, [])
            for position in positions:
                if not made:
                    self.add(Kind.ORPHAN_OUTPUT, [position], call_id=key[1])
                elif made[0] > position:
                    self.add(Kind.OUTPUT_BEFORE_CALL, [position], call_id=key[1], related=made)
        # The SDK drops a call without an output from the model input it builds from a session
        # (drop_orphan_function_calls, agents/run_internal/items.py:211, over the whole history
        # at agents/run_internal/session_persistence.py:580): a program without its output goes
        # with every item it issued, and so does the reasoning right before a dropped item
        # (items.py:314). Those of the last turn may yet be answered: they stay, as open.
        orphan_programs = {k[1] for k in calls if k[0] == "program" and k not in outputs and k[1]}
        index = {position: at for at, position in enumerate(alive)}
        for key, positions in calls.items():
            if key in outputs:
                continue
            for position in positions:
                view = views[position]
                if view.caller in orphan_programs:
                    continue  # reported with its program
                if position >= last_turn or (view.caller is not None and view.pending_shell):
                    self.add(Kind.OPEN_CALL, [position], call_id=key[1])
                    continue
                owned = [p for p in alive if key[0] == "program" and views[p].caller == key[1]]
                tied = set(owned)
                for dropped in [position, *owned]:
                    at = index[dropped] - 1
                    while at >= 0 and views[alive[at]].type == "reasoning":
                        tied.add(alive[at])
                        at -= 1
                self.add(Kind.ORPHAN_CALL, [position], call_id=key[1], related=sorted(tied))
