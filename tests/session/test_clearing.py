"""One journal commit per append: an acknowledged intent is cleared in the next append's
opening (back to back), or in the background at the loop's next turn; after a crash, an
uncleared acknowledged intent is judged (committed), never replayed."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.sqlite.journal import SQLiteJournal
from agents_reconcile._core.crashpoints import CrashPoint
from agents_reconcile._core.records import Action, Outcome


def item(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"message {n}"}


class CountingJournal(SQLiteJournal):
    """The SQLite journal, counting what the wrapper asks of it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.discards = 0
        self.clearings: list[str | None] = []

    async def discard(self, intent_id: str, **held: Any) -> None:
        self.discards += 1
        await super().discard(intent_id, **held)

    async def open_intent(self, intent: Any, **options: Any) -> Any:
        self.clearings.append(options.get("clearing"))
        return await super().open_intent(intent, **options)


def commits(path: Path) -> int:
    """The session's write count: each opening and each clearing counts one."""
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT sum(write_count) FROM live").fetchone()
    return int(row[0] or 0)


async def background_turns() -> None:
    """Two turns of the loop: the background clearing is set up at the first after the
    acknowledgement and runs at the second."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def wrapped(tmp_path: Path, journal: Any) -> ReconcilingSession:
    store = SQLiteSession("chat", tmp_path / "chat.db")
    return ReconcilingSession(store, config=ReconcileConfig(journal=journal))


async def test_back_to_back_appends_fold_each_clearing_into_the_next_opening(
    tmp_path: Path,
) -> None:
    journal = CountingJournal(tmp_path / "journal.db")
    session = wrapped(tmp_path, journal)
    for n in range(5):
        await session.add_items([item(n)])
    # No clearing of its own on the way: each went with the opening after it.
    assert journal.discards == 0
    assert journal.clearings[0] is None and all(journal.clearings[1:])
    assert len(await journal.pending("chat")) == 1  # the last, acknowledged, not cleared yet
    await background_turns()  # the background clearing
    assert await journal.pending("chat") == []
    assert journal.discards == 1
    assert commits(tmp_path / "journal.db") == 10  # an opening and a clearing per append
    assert await session.get_items() == [item(n) for n in range(5)]
    assert await journal.decisions() == []


async def test_an_idle_session_is_cleared_in_the_background(tmp_path: Path) -> None:
    journal = CountingJournal(tmp_path / "journal.db")
    session = wrapped(tmp_path, journal)
    await session.add_items([item(1)])
    await background_turns()
    assert await journal.pending("chat") == []
    assert journal.discards == 1


async def test_another_wrapper_of_this_process_clears_it_instead_of_judging_it(
    tmp_path: Path,
) -> None:
    journal = CountingJournal(tmp_path / "journal.db")
    first, second = wrapped(tmp_path, journal), wrapped(tmp_path, journal)
    await first.add_items([item(1)])
    # Before the loop turns: the first wrapper's intent is still in the journal.
    assert len(await journal.pending("chat")) == 1
    assert [entry.intent_id for entry in await second.pending()] != []
    await second.add_items([item(2)])
    assert await second.get_items() == [item(1), item(2)]
    assert await journal.decisions() == []  # cleared, not judged and settled
    await background_turns()
    assert await journal.pending("chat") == []


async def test_reads_see_no_pending_write_after_an_acknowledged_append(tmp_path: Path) -> None:
    """The wrapper's own view never shows its acknowledged intent as pending work."""
    session = wrapped(tmp_path, tmp_path / "journal.db")
    await session.add_items([item(1)])
    assert await session.reconcile() == []
    assert await session.get_items() == [item(1)]


def run_sync_twice(tmp_path: Path) -> None:
    session = wrapped(tmp_path, tmp_path / "journal.db")
    for text in ("one", "two"):
        agent = Agent(name="a", model=ScriptedModel([[assistant_message("ok")]]))
        Runner.run_sync(
            agent, text, session=session, run_config=session.run_config(), hooks=session.hooks()
        )


def test_runner_run_sync_leaves_nothing_pending(tmp_path: Path) -> None:
    """``Runner.run_sync`` stops its loop when the run returns: the clearing has run by
    then, for the last append of the run too."""
    run_sync_twice(tmp_path)
    with sqlite3.connect(tmp_path / "journal.db") as conn:
        assert conn.execute("SELECT count(*) FROM unresolved").fetchone() == (0,)


CHILD = """
import asyncio, sys
from agents import SQLiteSession
from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core import crashpoints

crashpoints.arm(crashpoints.CrashPoint.BEFORE_CLEARING, at=int(sys.argv[3]))
session = ReconcilingSession(
    SQLiteSession("chat", sys.argv[1]), config=ReconcileConfig(journal=sys.argv[2])
)

async def main():
    for n in range(3):
        await session.add_items([{"role": "user", "content": f"message {n}"}])
        if sys.argv[4] == "idle":
            await asyncio.sleep(0.01)

asyncio.run(main())
"""


@pytest.mark.parametrize("mode", ["folded", "idle"])
@pytest.mark.parametrize("at", [1, 2])
def test_a_crash_before_the_clearing_is_judged_committed(
    tmp_path: Path, mode: str, at: int
) -> None:
    """SIGKILL with an acknowledged intent still in the journal (its clearing about to be
    folded into the next opening, or about to run in the background): the next process
    finds its batch committed, and nothing is written twice."""
    chat, journal = tmp_path / "chat.db", tmp_path / "journal.db"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(chat), str(journal), str(at), mode],
        capture_output=True,
        timeout=60,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    session = wrapped(tmp_path, journal)

    async def recover() -> tuple[list[Any], list[Any]]:
        decisions = await session.reconcile()
        return decisions, await session.get_items()

    decisions, items = asyncio.run(recover())
    assert [(d.outcome, d.action) for d in decisions] == [(Outcome.COMMITTED, Action.SETTLED)]
    assert items == [item(n) for n in range(at)]


def test_the_clearing_crash_point_is_reached_once_per_append(tmp_path: Path) -> None:
    from agents_reconcile._core import crashpoints

    reached: list[CrashPoint] = []
    session = wrapped(tmp_path, tmp_path / "journal.db")

    async def appends(count: int) -> CrashPoint | None:
        for n in range(count):
            await session.add_items([item(n)])
        await background_turns()
        return crashpoints.armed()

    try:
        crashpoints.arm(CrashPoint.BEFORE_CLEARING, at=3, action=reached.append)
        assert asyncio.run(appends(3)) is None
        assert reached == [CrashPoint.BEFORE_CLEARING]
        crashpoints.arm(CrashPoint.BEFORE_CLEARING, at=4, action=reached.append)
        assert asyncio.run(appends(3)) is CrashPoint.BEFORE_CLEARING
    finally:
        crashpoints.disarm()


class SlowClearing(SQLiteJournal):
    """A journal whose clearing takes a while (a server's round trip): the loop is shut
    down while it is under way."""

    async def discard(self, intent_id: str, **held: Any) -> None:
        await asyncio.sleep(0.05)
        await super().discard(intent_id, **held)


def intents_in(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM unresolved").fetchone()[0])


def test_a_loop_shut_down_right_after_an_append_clears_it_first(tmp_path: Path) -> None:
    """``asyncio.run`` cancels what is left when its coroutine returns; the loop's guard
    still clears the acknowledged intent before the loop closes, so another process never
    waits for it."""
    session = wrapped(tmp_path, SlowClearing(tmp_path / "journal.db"))

    async def append(n: int) -> None:
        await session.add_items([item(n)])

    for n in range(3):
        asyncio.run(append(n))
        assert intents_in(tmp_path / "journal.db") == 0
    assert asyncio.run(session.get_items()) == [item(n) for n in range(3)]


async def test_back_to_back_appends_on_one_session_never_back_off(
    journal: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On every journal, each append clears the one before it as part of its own opening:
    appends that follow each other at once never meet their own previous intent, so none of
    them settles it or backs off to build its intent again."""
    from agents_reconcile._session.writer import Writer

    back_offs: list[int] = []
    real = Writer.back_off

    async def counted(self: Writer, progress: Any) -> None:
        back_offs.append(progress.attempts)
        await real(self, progress)

    monkeypatch.setattr(Writer, "back_off", counted)
    session = ReconcilingSession(
        SQLiteSession("s1", str(tmp_path / "chat.db")), config=ReconcileConfig(journal=journal)
    )
    for n in range(30):
        await session.add_items([item(n)])
    assert back_offs == [], f"{len(back_offs)} of 30 back-to-back appends backed off"
    assert [i["content"] for i in await session.get_items()] == [f"message {n}" for n in range(30)]
    assert await session.pending() == []
