"""ReconcilingSession over a revisioned store: appends are compare-and-swaps, verdicts are
facts from the store's record of writes, and other workers' writes are told apart from damage."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import ContinuationDenied, Outcome, ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.sqlite.store import RevisionedSQLiteSession
from agents_reconcile._core.records import Action, Reason
from agents_reconcile._selftest.scenario import item_name as summarize
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession


def item(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def worker(tmp_path: Path, *, faulty: bool = False, **config: Any) -> Any:
    store: Any = RevisionedSQLiteSession("s", tmp_path / "store.db")
    if faulty:
        store = FaultInjectingSession(store)
    return ReconcilingSession(
        store, config=ReconcileConfig(journal=tmp_path / "journal.db", **config)
    )


async def texts(tmp_path: Path) -> list[str]:
    items = await RevisionedSQLiteSession("s", tmp_path / "store.db").get_items()
    return [summarize(i).split(":", 1)[1] for i in items]


async def foreign(tmp_path: Path, text: str) -> None:
    """Another writer, through the store itself (no wrapper, no journal)."""
    await RevisionedSQLiteSession("s", tmp_path / "store.db").add_items([item(text)])


async def test_an_append_on_a_moved_head_is_refused_as_an_extension(tmp_path: Path) -> None:
    one, two = worker(tmp_path), worker(tmp_path)
    await one.add_items([item("a")])
    await two.add_items([item("b")])  # two reads the head (1) and writes on it
    with pytest.raises(ContinuationDenied) as denied:
        await one.add_items([item("c")])  # one still builds on revision 1
    decision = denied.value.decision
    assert (decision.outcome, decision.reason) == (Outcome.EXTENDED, Reason.EXTENDED_BY_OTHERS)
    assert decision.evidence["writes"] == 1 and decision.evidence["writers"]
    assert await texts(tmp_path) == ["a", "b"]
    assert await one.pending() == [], "a refused compare-and-swap wrote nothing: no intent"


async def test_on_extended_append_writes_after_the_others(tmp_path: Path) -> None:
    one, two = worker(tmp_path), worker(tmp_path, on_extended="append")
    await two.add_items([item("a")])
    await one.add_items([item("b")])
    await two.add_items([item("c")])
    assert await texts(tmp_path) == ["a", "b", "c"]


async def test_a_fresh_run_after_another_workers_write_goes_on(tmp_path: Path) -> None:
    """A fresh run reads the whole history, so it builds on the head it saw."""
    one, two = worker(tmp_path), worker(tmp_path)
    agent = Agent(
        name="a", model=ScriptedModel([[assistant_message("x")], [assistant_message("y")]])
    )
    await Runner.run(agent, "first", session=one, run_config=one.run_config())
    await two.add_items([item("elsewhere")])
    await Runner.run(agent, "second", session=one, run_config=one.run_config())
    assert await texts(tmp_path) == ["first", "x", "elsewhere", "second", "y"]


@pytest.mark.parametrize("policy", ["fail", "append"])
async def test_a_failed_write_under_another_writer_is_extended(tmp_path: Path, policy: str) -> None:
    mine = worker(tmp_path, faulty=True, on_extended=policy)
    await mine.add_items([item("a")])
    mine.inner.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await mine.add_items([item("b")])
    await foreign(tmp_path, "other")
    if policy == "fail":
        with pytest.raises(ContinuationDenied) as denied:
            await mine.reconcile()
        assert denied.value.decision.outcome is Outcome.EXTENDED
        assert len(await mine.pending()) == 1, "left for an operator"
        assert await texts(tmp_path) == ["a", "other"]
    else:
        [decision] = await mine.reconcile()
        assert (decision.outcome, decision.action) == (Outcome.EXTENDED, Action.REPLAYED)
        assert await texts(tmp_path) == ["a", "other", "b"]


async def test_a_replay_after_others_whose_reply_is_lost_is_found_committed(
    tmp_path: Path,
) -> None:
    """Under on_extended="append" a missing write is replayed after the others' writes,
    under an id of its own; when that replay's reply is lost, the next judgement finds it
    there (committed), not "recorded out of place", and it is stored once."""
    mine = worker(tmp_path, faulty=True, on_extended="append")
    mine.inner.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await mine.add_items([item("a")])
    await foreign(tmp_path, "other")
    mine.inner.plan(Fault.LOST_ACK)  # the replay lands, its reply does not
    with pytest.raises(BackendFailure):
        await mine.reconcile()
    [decision] = await mine.reconcile()
    assert (decision.outcome, decision.reason) == (Outcome.COMMITTED, Reason.WRITE_FOUND)
    assert decision.evidence["replayed_after_extension"] is True
    assert await texts(tmp_path) == ["other", "a"]


async def test_an_append_whose_earlier_write_cannot_be_settled_did_not_start(
    tmp_path: Path,
) -> None:
    """When settling an earlier write fails (its replay raises), the caller's own append
    raises too, with a note saying its batch never started: nothing of it was written and
    no intent of it is pending."""
    mine = worker(tmp_path, faulty=True)
    mine.inner.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await mine.add_items([item("a")])
    mine.inner.plan(Fault.REJECT)  # the replay of "a" fails too
    with pytest.raises(BackendFailure) as failed:
        await mine.add_items([item("b")])
    assert any("did not start" in note for note in failed.value.__notes__)
    [pending] = await mine.pending()
    assert pending.batch[0]["content"] == "a"
    await mine.add_items([item("b")])
    assert await texts(tmp_path) == ["a", "b"]


async def test_lost_ack_under_another_writer_is_still_committed(tmp_path: Path) -> None:
    """Fingerprints would call this ambiguous; the write id proves it landed."""
    mine = worker(tmp_path, faulty=True)
    mine.inner.plan(Fault.LOST_ACK)
    with pytest.raises(BackendFailure):
        await mine.add_items([item("a")])
    await foreign(tmp_path, "other")
    [decision] = await mine.reconcile()
    assert (decision.outcome, decision.reason) == (Outcome.COMMITTED, Reason.WRITE_FOUND)
    assert await texts(tmp_path) == ["a", "other"]


async def test_a_damaged_record_of_writes_is_ambiguous(tmp_path: Path) -> None:
    mine = worker(tmp_path, faulty=True)
    mine.inner.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await mine.add_items([item("a")])
    await foreign(tmp_path, "other")
    await foreign(tmp_path, "another")
    with sqlite3.connect(tmp_path / "store.db") as conn:
        conn.execute("DELETE FROM revisioned_writes WHERE revision = 1")
    with pytest.raises(ContinuationDenied) as denied:
        await mine.reconcile()
    decision = denied.value.decision
    assert (decision.outcome, decision.reason) == (Outcome.AMBIGUOUS, Reason.WRITE_RECORD_BROKEN)
    assert "missing" in decision.evidence["problem"]


async def test_a_revisioned_intent_is_never_judged_by_fingerprints(tmp_path: Path) -> None:
    """The same store file read through a plain session is another backend: refused."""
    mine = worker(tmp_path, faulty=True)
    mine.inner.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await mine.add_items([item("a")], wrapper=None)
    [entry] = await mine.journal.pending("s")
    assert entry.intent.expected_revision == 0
    assert entry.intent.before_digests == ()


async def test_the_sqlite_store_schema_is_versioned(tmp_path: Path) -> None:
    """A file without the schema is refused with migrate=False and reported by check(); a
    newer schema is refused; migrate() creates what is missing, once."""
    from agents_reconcile.errors import SchemaMismatch

    path = tmp_path / "store.db"
    unmigrated = RevisionedSQLiteSession("s", path, migrate=False)
    assert "no revisioned-store schema" in (await unmigrated.check() or "")
    with pytest.raises(SchemaMismatch, match="migrate"):
        await unmigrated.get_items()
    assert await unmigrated.migrate() == ["revisioned store schema 1"]
    assert await unmigrated.migrate() == []
    assert await unmigrated.check() is None
    await unmigrated.close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO revisioned_schema (version, applied_at) VALUES (99, 0)")
    newer = RevisionedSQLiteSession("s", path)
    with pytest.raises(SchemaMismatch, match="newer"):
        await newer.add_items([item("a")])
    assert "newer" in (await newer.check() or "")


def test_a_bad_on_extended_policy_is_refused() -> None:
    from agents_reconcile.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="on_extended"):
        ReconcileConfig(on_extended="merge")  # type: ignore[arg-type]
