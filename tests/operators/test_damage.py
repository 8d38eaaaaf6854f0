"""The damage finder and the repair plan, over histories built by hand: every kind found where
it is, removals only where the evidence proves them, and no content in what they report."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents.run_internal import items as sdk_items

from agents_reconcile._core.fingerprint import item_digest
from agents_reconcile._operator.damage import CALL_OUTPUT_TYPES, Kind, find_damage, plan_repair

SECRET = "SECRET-7f3a-do-not-print"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": f"{text} {SECRET}"}


def assistant(text: str, item_id: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": f"{text} {SECRET}", "annotations": []}],
    }


def call(call_id: str, kind: str = "function_call", **extra: Any) -> dict[str, Any]:
    return {"type": kind, "call_id": call_id, "name": "charge", "arguments": SECRET, **extra}


def output(call_id: str, kind: str = "function_call_output", text: str = "ok") -> dict[str, Any]:
    return {"type": kind, "call_id": call_id, "output": f"{text} {SECRET}"}


def reasoning(item_id: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": SECRET}],
    }


def kinds(items: list[Any]) -> dict[str, list[tuple[int, ...]]]:
    found: dict[str, list[tuple[int, ...]]] = {}
    for finding in find_damage(items).findings:
        found.setdefault(finding.kind.value, []).append(finding.positions)
    return found


def every_kind() -> list[Any]:
    return [
        user("hi"),  # 0
        call("c1"),  # 1
        output("c1"),  # 2
        assistant("done", "m1"),  # 3
        user("again"),  # 4: a batch 4..7, stored again as 8..11
        call("c2"),
        output("c2"),
        assistant("ok", "m2"),
        user("again"),  # 8
        call("c2"),
        output("c2"),
        assistant("ok", "m2"),  # 11
        output("gone"),  # 12: orphan output
        reasoning("r1"),  # 13: tied to the orphan call
        call("c3"),  # 14: orphan call
        user("more"),  # 15
        output("c4"),  # 16: before its call
        call("c4"),  # 17
        output("c1", text="other"),  # 18: conflicts with 2
        call("c1"),  # 19: a duplicate of 1
        user("twice"),  # 20, 21: repeated, no identity
        user("twice"),
        assistant("let me check", "m3"),  # 22
        call("c9"),  # 23: open, the last turn
    ]


def test_every_kind_is_found_with_positions_digests_and_call_ids() -> None:
    items = every_kind()
    damage = find_damage(items)
    assert damage.digests == tuple(item_digest(item) for item in items)
    found = {(f.kind, f.positions): f for f in damage.findings}
    assert set(found) == {
        (Kind.DUPLICATE, (1, 19)),
        (Kind.IDENTITY_CONFLICT, (2, 18)),
        (Kind.REPEATED_BATCH, (8, 9, 10, 11)),
        (Kind.ORPHAN_OUTPUT, (12,)),
        (Kind.ORPHAN_CALL, (14,)),
        (Kind.OUTPUT_BEFORE_CALL, (16,)),
        (Kind.REPEATED_RUN, (21,)),
        (Kind.OPEN_CALL, (23,)),
    }
    for finding in damage.findings:
        assert finding.digests == tuple(item_digest(items[p]) for p in finding.positions)
    assert found[(Kind.REPEATED_BATCH, (8, 9, 10, 11))].related == (4, 5, 6, 7)
    assert found[(Kind.ORPHAN_CALL, (14,))].related == (13,)
    assert found[(Kind.ORPHAN_CALL, (14,))].call_id == "c3"
    assert found[(Kind.OUTPUT_BEFORE_CALL, (16,))].related == (17,)
    assert found[(Kind.ORPHAN_OUTPUT, (12,))].call_id == "gone"
    assert damage.damaged


def test_the_plan_removes_what_is_proven_and_leaves_the_rest_with_reasons() -> None:
    items = every_kind()
    plan = plan_repair(find_damage(items))
    assert {r.position: r.kind for r in plan.removals} == {
        8: Kind.REPEATED_BATCH,
        9: Kind.REPEATED_BATCH,
        10: Kind.REPEATED_BATCH,
        11: Kind.REPEATED_BATCH,
        12: Kind.ORPHAN_OUTPUT,
        13: Kind.ORPHAN_CALL,
        14: Kind.ORPHAN_CALL,
        19: Kind.DUPLICATE,
    }
    assert {left.finding.kind for left in plan.left} == {
        Kind.IDENTITY_CONFLICT,
        Kind.OUTPUT_BEFORE_CALL,
        Kind.REPEATED_RUN,
    }
    assert all(left.why.endswith(".") for left in plan.left)
    kept = plan.apply(items)
    assert len(kept) == len(items) - 8
    assert kept[-1] == call("c9"), "an open call stays"
    with pytest.raises(ValueError):
        plan.apply(items[:-1])


def test_reports_hold_no_content() -> None:
    items = every_kind()
    damage = find_damage(items)
    text = json.dumps([damage.to_json(), plan_repair(damage).to_json()])
    assert SECRET not in text
    assert "charge" not in text, "not even a tool's name"


def test_a_healthy_history_has_nothing_to_repair() -> None:
    items = [user("hi"), call("c1"), output("c1"), assistant("done", "m1"), user("hi")]
    damage = find_damage(items)
    assert damage.findings == ()
    assert plan_repair(damage).removals == ()


def test_a_call_awaiting_approval_in_the_last_turn_is_open() -> None:
    items = [user("hi"), assistant("calling", "m1"), call("c1"), call("c2"), output("c2")]
    assert kinds(items) == {"open_call": [(2,)]}
    assert not find_damage(items).damaged


def test_a_batch_stored_three_times_keeps_one_copy() -> None:
    batch = [call("c1"), output("c1"), assistant("done", "m1")]
    items = [user("hi"), *batch, *batch, *batch]
    plan = plan_repair(find_damage(items))
    assert plan.apply(items) == [user("hi"), *batch]
    assert kinds(items) == {"repeated_batch": [(4, 5, 6, 7, 8, 9)]}


def test_every_call_type_pairs_with_its_own_output_type() -> None:
    items: list[Any] = [user("hi")]
    for number, (call_type, output_type) in enumerate(CALL_OUTPUT_TYPES.items()):
        items += [call(f"k{number}", call_type), output(f"k{number}", output_type)]
    items += [call("x", "computer_call"), output("x", "local_shell_call_output"), user("end")]
    found = find_damage(items)
    assert {(f.kind, f.call_id) for f in found.findings} == {
        (Kind.ORPHAN_CALL, "x"),
        (Kind.ORPHAN_OUTPUT, "x"),
    }


def test_the_pairing_map_is_the_sdks() -> None:
    assert sdk_items._TOOL_CALL_TO_OUTPUT_TYPE == CALL_OUTPUT_TYPES


def test_mcp_approvals_pair_by_request_id() -> None:
    request = {"type": "mcp_approval_request", "id": "mr1", "name": "t", "arguments": SECRET}
    answered = {"type": "mcp_approval_response", "approval_request_id": "mr1", "approve": True}
    stray = {"type": "mcp_approval_response", "approval_request_id": "gone", "approve": False}
    unanswered = {"type": "mcp_approval_request", "id": "mr2", "name": "t", "arguments": "{}"}
    items = [user("hi"), request, answered, stray, unanswered, user("later"), unanswered | {}]
    damage = find_damage(items)
    plan = plan_repair(damage)
    assert [r.position for r in plan.removals] == [3, 6]
    assert [(left.finding.kind, left.finding.positions) for left in plan.left] == [
        (Kind.ORPHAN_CALL, (4,))
    ]


def test_repeated_identical_messages_without_identity_are_left_alone() -> None:
    items = [user("ok"), user("ok"), assistant("fine", "m1")]
    plan = plan_repair(find_damage(items))
    assert plan.removals == ()
    assert [left.finding.kind for left in plan.left] == [Kind.REPEATED_RUN]


def test_the_sdks_placeholder_id_is_no_identity() -> None:
    placeholder = {"id": "__fake_id__", "type": "reasoning", "summary": []}
    items = [user("a"), placeholder, assistant("x", "m1"), user("b"), placeholder]
    assert "duplicate" not in kinds(items)


def sdk_dropped(items: list[Any]) -> set[int]:
    """The positions the SDK leaves out of a model input built from ``items`` as history."""
    kept = sdk_items.drop_orphan_function_calls(list(items), pruning_indexes=set(range(len(items))))
    survivors = {id(item) for item in kept}
    return {position for position, item in enumerate(items) if id(item) not in survivors}


def test_orphan_calls_go_exactly_as_the_sdk_drops_them() -> None:
    program = {"caller": {"type": "program", "caller_id": "p1"}}
    items: list[Any] = [
        user("hi"),
        reasoning("r1"),
        reasoning("r2"),
        call("c1"),  # orphan, with two reasoning items before it
        call("p1", "program"),  # a program without its output...
        reasoning("r3"),
        call("c2", **program),  # ...takes the items it issued
        output("c2", **{}) | program,
        {"type": "tool_search_call", "id": "ts1", "arguments": {}},  # anonymous, answered
        {"type": "tool_search_output", "id": "ts2", "tools": []},
        {"type": "tool_search_call", "id": "ts3", "arguments": {}},  # anonymous, unanswered
        call("c3", "shell_call"),
        output("c3", "shell_call_output"),
        assistant("done", "m1"),
    ]
    plan = plan_repair(find_damage(items))
    assert plan.positions == sdk_dropped(items)
    assert plan.positions == {1, 2, 3, 4, 5, 6, 7, 10}


def test_ids_left_out_of_digests_when_the_session_says_so() -> None:
    first = assistant("same", "m1")
    second = assistant("same", "m2")
    items = [user("a"), first, user("b"), second]
    assert find_damage(items).findings == ()
    assert (
        find_damage(items, ignore_ids=True).digests[1]
        == find_damage(items, ignore_ids=True).digests[3]
    )
