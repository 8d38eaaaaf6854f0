"""On the real SDK runner, a tool output holding a lone surrogate (undecodable bytes kept by
``surrogateescape``) is journaled, stored and replayed exactly, as an unwrapped session
stores it, instead of failing the run after the tool has run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, FunctionTool, Runner, SQLiteSession, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_reconcile import Action, Outcome, ReconcileConfig, ReconcilingSession
from agents_reconcile._core.records import PendingWrite
from agents_reconcile._session.runstate import CONTEXT_KEY
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

RAW = b"PNG\x89\r\n\x1a\n\xff\xfe tail"
OUTPUT = RAW.decode("utf-8", "surrogateescape")


def read_tool(calls: list[str]) -> FunctionTool:
    """A tool that prints a binary file's bytes as text, as a shell tool would."""

    @function_tool
    def read_file(path: str) -> str:
        """Read a file."""
        calls.append(path)
        return OUTPUT

    return read_file


def agent(calls: list[str], *steps: list[Any]) -> Agent[Any]:
    """An agent that calls the tool once and then answers, or follows ``steps``."""
    script = list(steps) or [
        [function_call("read_file", {"path": "logo.png"}, call_id="c1")],
        [assistant_message("done")],
    ]
    return Agent(name="a", model=ScriptedModel(script), tools=[read_tool(calls)])


def rows(database: Path) -> list[str]:
    """The item texts the SDK's SQLite session wrote, oldest first."""
    with sqlite3.connect(database) as connection:
        return [
            text
            for (text,) in connection.execute("SELECT message_data FROM agent_messages ORDER BY id")
        ]


def tool_output(items: list[Any]) -> Any:
    [output] = [item for item in items if item.get("type") == "function_call_output"]
    return output["output"]


async def test_a_wrapped_run_stores_what_an_unwrapped_run_stores(tmp_path: Path) -> None:
    """The wrapped run completes, and its session holds, item for item and byte for byte,
    what the SDK's own SQLite session holds after the same run unwrapped."""
    assert "\udcff" in OUTPUT and "\udc89" in OUTPUT  # not UTF-8: orjson cannot write it
    plain_calls: list[str] = []
    plain = SQLiteSession("s", tmp_path / "plain.db")
    unwrapped = await Runner.run(agent(plain_calls), "hi", session=plain)

    calls: list[str] = []
    session = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "j.db"),
    )
    wrapped = await Runner.run(agent(calls), "hi", session=session, run_config=session.run_config())

    assert wrapped.final_output == unwrapped.final_output == "done"
    assert calls == plain_calls == ["logo.png"]
    stored = await SQLiteSession("s", tmp_path / "chat.db").get_items()
    assert stored == await plain.get_items()
    assert tool_output(stored) == OUTPUT
    assert rows(tmp_path / "chat.db") == rows(tmp_path / "plain.db")
    assert await session.pending() == []


@pytest.mark.parametrize("replayer", ["same wrapper", "new process"])
async def test_a_rejected_tool_turn_is_replayed_with_its_surrogates(
    tmp_path: Path, replayer: str
) -> None:
    """The tool-turn save is rejected after the tool ran; the next run replays it (from this
    wrapper's memory, or from the journal's copy in a new process), the stored output holds
    the very surrogates the tool returned, and the tool is not run again."""
    calls: list[str] = []
    faulty = FaultInjectingSession(SQLiteSession("s", tmp_path / "chat.db"))
    config = ReconcileConfig(journal=tmp_path / "j.db")
    session = ReconcilingSession(faulty, config=config)
    faulty.plan(Fault.REJECT, at=2)
    context: dict[str, Any] = {}
    with pytest.raises(BackendFailure):
        await Runner.run(
            agent(calls), "hi", session=session, run_config=session.run_config(), context=context
        )
    assert calls == ["logo.png"]
    # The RunState's copy of the intent survives the SDK's own (stdlib) JSON round trip.
    [carried] = json.loads(json.dumps(context))[CONTEXT_KEY]["pending"]
    assert tool_output(list(PendingWrite.decode(carried).batch)) == OUTPUT

    if replayer == "new process":
        session = ReconcilingSession(SQLiteSession("s", tmp_path / "chat.db"), config=config)
    again = agent(calls, [assistant_message("again")])
    result = await Runner.run(again, "next", session=session, run_config=session.run_config())

    assert result.final_output == "again"
    assert calls == ["logo.png"]
    [decision] = await session.decisions()
    assert (decision.outcome, decision.action) == (Outcome.UNCHANGED, Action.REPLAYED)
    stored = await SQLiteSession("s", tmp_path / "chat.db").get_items()
    assert [item.get("type", item.get("role")) for item in stored] == [
        "user",
        "function_call",
        "function_call_output",
        "user",
        "message",
    ]
    assert tool_output(stored) == OUTPUT
    assert tool_output(stored).encode("utf-8", "surrogateescape") == RAW
    assert await session.pending() == []
