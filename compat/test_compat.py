"""Checks of the comparison command's own parts (``python -m pytest compat``): no network,
no SDK source distribution, no virtual environment."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from agents import RunConfig, RunHooks
from agents.lifecycle import RunHooksBase
from agents.memory import SQLiteSession

from agents_reconcile import MemoryJournal, ReconcileConfig, ReconcilingSession
from compat.compare import (
    BASELINE,
    NOT_EXERCISED,
    REVIEWED,
    SAME,
    UNEXPECTED,
    Reviewed,
    compare,
    error_group,
    exercised,
)
from compat.sdk_tests import default_selection, files_of, in_range, lock_constraints
from compat.wrap_sessions import Wrapping, composed_config, is_local


def _result(outcome: str, runs: int = 1, message: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"outcome": outcome, "counts": {"runs": runs}}
    if message is not None:
        found["message"] = message
    return found


def test_in_range_reads_the_declared_range() -> None:
    assert in_range("0.24.0", ">=0.24.0,<0.25")
    assert in_range("0.24.9", ">=0.24.0,<0.25")
    assert not in_range("0.25.0", ">=0.24.0,<0.25")
    assert not in_range("0.23.1", ">=0.24.0,<0.25")
    assert not in_range("0.24.1rc1", ">=0.24.0,<0.25")
    assert in_range("1.0", "==1.0.0")
    assert not in_range("1.0.1", "!=1.0.1")


def test_lock_constraints_pin_single_versions_except_skipped(tmp_path: Path) -> None:
    (tmp_path / "uv.lock").write_text(
        textwrap.dedent(
            """
            [[package]]
            name = "openai"
            version = "3.29.0"

            [[package]]
            name = "Pytest"
            version = "9.0.3"

            [[package]]
            name = "numpy"
            version = "2.2.0"

            [[package]]
            name = "numpy"
            version = "2.3.0"

            [[package]]
            name = "openai-agents"
            version = "0.24.0"
            """
        )
    )
    assert lock_constraints(tmp_path, ["pytest"]) == ["openai==3.29.0"]
    assert lock_constraints(tmp_path / "missing", []) == []


def test_selection_finds_files_that_pass_a_session_to_a_run(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    (tests / "memory").mkdir(parents=True)
    (tests / "memory" / "test_a.py").write_text("")
    (tests / "test_runs.py").write_text(
        "async def test_x():\n    await Runner.run(a, 'x', session=s)\n"
    )
    (tests / "test_none.py").write_text(
        "async def test_y():\n    await Runner.run(a, 'x', session=None)\n"
    )
    (tests / "test_tool.py").write_text("def test_z():\n    Tool(session=s).run()\n")
    (tests / "test_hitl_session_scenario.py").write_text("")
    assert default_selection(tmp_path) == [
        "tests/memory",
        "tests/test_hitl_session_scenario.py",
        "tests/test_runs.py",
    ]


def test_compare_sorts_every_test_into_one_status() -> None:
    before = {
        "tests": {
            "t.py::same": _result("passed"),
            "t.py::broken": _result("passed"),
            "t.py::known[a]": _result("passed"),
            "t.py::quiet": _result("passed", runs=0),
            "t.py::lost": _result("passed"),
            "t.py::skipped": _result("skipped"),
        }
    }
    after = {
        "tests": {
            "t.py::same": _result("passed"),
            "t.py::broken": _result("failed", message="AssertionError: assert 3 == 4"),
            "t.py::known[a]": _result("failed", message="UserError: no"),
        }
    }
    reviewed = Reviewed({"t.py::known": "asserts the SDK's text", "t.py::gone": "old"})
    comparison = compare(before, after, reviewed)
    statuses = {row.nodeid: row.status for row in comparison.rows}
    assert statuses == {
        "t.py::same": SAME,
        "t.py::broken": UNEXPECTED,
        "t.py::known[a]": REVIEWED,
        "t.py::quiet": NOT_EXERCISED,
        "t.py::lost": UNEXPECTED,
        "t.py::skipped": BASELINE,
    }
    assert comparison.stale_reviews == ["t.py::gone"]
    assert comparison.summary()["failing_wrapped_only"] == 2
    assert exercised(before["tests"]) == [
        "t.py::broken",
        "t.py::known[a]",
        "t.py::lost",
        "t.py::same",
    ]
    assert files_of(["a.py::x", "b.py::y", "a.py::z"]) == ["a.py", "b.py"]


def test_error_groups_blur_numbers_and_addresses() -> None:
    assert error_group("AssertionError: assert 3 == 4\nmore") == "AssertionError: assert N == N"
    assert error_group("at 0x7f00aa") == "at 0x…"
    assert error_group(None) == "(no message)"


def test_reviewed_file_must_give_reasons(tmp_path: Path) -> None:
    path = tmp_path / "reviewed.toml"
    path.write_text('[reviewed]\n"t.py::x" = ""\n')
    with pytest.raises(ValueError, match="non-empty reasons"):
        Reviewed.load(path)
    assert Reviewed.load(tmp_path / "absent.toml").reasons == {}


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        (None, True),
        ("0.0.0.0", True),
        ("10.0.0.1", False),
        ("example.org", False),
        ("8.8.8.8", False),
    ],
)
def test_only_loopback_is_local(host: object, local: bool) -> None:
    assert is_local(host) is local


def test_no_config_stays_a_mapping_holding_only_the_gate(tmp_path: Path) -> None:
    wrapper = ReconcilingSession(
        SQLiteSession("s"), config=ReconcileConfig(journal=MemoryJournal())
    )
    composed = composed_config(wrapper, None)
    assert isinstance(composed, dict)
    assert "model_provider" not in composed
    assert composed["call_model_input_filter"] is not None
    given = RunConfig(workflow_name="w")
    assert composed_config(wrapper, given).workflow_name == "w"
    assert composed_config(wrapper, {"workflow_name": "w"})["workflow_name"] == "w"
    assert composed_config(wrapper, "not a config") == "not a config"


def test_one_wrapper_per_session_within_a_test(tmp_path: Path) -> None:
    state = Wrapping(wrap=True, journal="memory", base=tmp_path)
    state.begin_test()
    session = SQLiteSession("s")
    first = state.prepare({"session": session, "hooks": None, "run_config": None})
    second = state.prepare({"session": session, "hooks": RunHooks()})
    assert first["session"] is second["session"]
    assert isinstance(first["session"], ReconcilingSession)
    assert first["session"].inner is session
    assert isinstance(second["hooks"], RunHooksBase)
    assert state.counts.runs == 2 and state.counts.wrapped == 2 and state.counts.wrappers == 1
    passed_on = state.prepare({"session": first["session"]})
    assert passed_on["session"] is first["session"]
    assert state.counts.given_wrapped == 1
    state.end_test()
    state.begin_test()
    third = state.prepare({"session": session})
    assert third["session"] is not first["session"]


def test_observing_changes_nothing(tmp_path: Path) -> None:
    state = Wrapping(wrap=False, journal="sqlite", base=tmp_path)
    state.begin_test()
    kwargs = {"session": SQLiteSession("s"), "run_config": None}
    assert state.prepare(kwargs) is kwargs
    assert state.counts.runs == 1 and state.counts.wrapped == 0
    state.end_test()
