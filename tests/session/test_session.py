"""ReconcilingSession's contract with the SDK and with its callers."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, RunHooks, Runner, SQLiteSession
from agents.memory import OpenAIConversationsSession, Session, SessionABC
from agents.memory.session import is_openai_responses_compaction_aware_session
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import (
    Action,
    BackendIdentity,
    ConfigurationError,
    ContinuationDenied,
    IntentState,
    JournalUnavailable,
    MemoryJournal,
    Outcome,
    Reason,
    ReconcileConfig,
    ReconcilingSession,
    UnsupportedSession,
)
from agents_reconcile._core.ownership import Owner, current_owner
from agents_reconcile._core.records import PendingWrite
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.runner_support import summarize

USER = {"role": "user", "content": "hi"}
ANSWER = {"role": "assistant", "content": "hello"}


def wrapped(
    tmp_path: Path, **config: Any
) -> tuple[ReconcilingSession, FaultInjectingSession, SQLiteSession]:
    inner = SQLiteSession("s1", tmp_path / "chat.db")
    faulty = FaultInjectingSession(inner)
    journal = config.pop("journal", tmp_path / "journal.db")
    return (
        ReconcilingSession(faulty, config=ReconcileConfig(journal=journal, **config)),
        faulty,
        inner,
    )


def text_agent(*replies: str) -> tuple[Agent[Any], ScriptedModel]:
    model = ScriptedModel([[assistant_message(reply)] for reply in replies])
    return Agent(name="assistant", model=model), model


class WrapperAwareSession:
    """A custom session whose methods opt into the SDK's ``wrapper`` keyword."""

    def __init__(self) -> None:
        self.session_id = "aware"
        self.items: list[Any] = []
        self.wrappers: list[Any] = []

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[Any]:
        self.wrappers.append(wrapper)
        return list(self.items if limit is None else self.items[-limit:] if limit else [])

    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        self.wrappers.append(wrapper)
        self.items.extend(items)

    async def pop_item(self, *, wrapper: Any = None) -> Any:
        return self.items.pop() if self.items else None

    async def clear_session(self, *, wrapper: Any = None) -> None:
        self.items.clear()


class LegacySession:
    """A session from before ``limit`` existed: ``get_items(self)`` only."""

    def __init__(self) -> None:
        self.session_id = "legacy"
        self.items: list[Any] = []

    async def get_items(self) -> list[Any]:
        return list(self.items)

    async def add_items(self, items: list[Any]) -> None:
        self.items.extend(items)

    async def pop_item(self) -> Any:
        return self.items.pop() if self.items else None

    async def clear_session(self) -> None:
        self.items.clear()


async def test_is_a_structural_session_with_the_inner_id(tmp_path: Path) -> None:
    """The wrapper satisfies the SDK's Session protocol without subclassing SessionABC."""
    session, _, inner = wrapped(tmp_path)
    assert isinstance(session, Session)
    assert not isinstance(session, SessionABC)
    assert session.session_id == inner.session_id
    assert session.session_settings is inner.session_settings


async def test_wrapper_reaches_only_inner_methods_that_accept_it(tmp_path: Path) -> None:
    """The SDK's run wrapper is forwarded to an inner session that names it, and the run's
    mapping context is visible to it."""
    inner = WrapperAwareSession()
    session = ReconcilingSession(inner, config=ReconcileConfig(journal=tmp_path / "j.db"))
    agent, _ = text_agent("hello")
    context = {"user": "42"}
    await Runner.run(agent, "hi", session=session, run_config=session.run_config(), context=context)
    assert inner.wrappers and all(w is not None for w in inner.wrappers)
    assert all(w.context is context for w in inner.wrappers)

    legacy = LegacySession()
    session = ReconcilingSession(legacy, config=ReconcileConfig(journal=tmp_path / "j.db"))
    agent, _ = text_agent("hello")
    await Runner.run(agent, "hi", session=session, run_config=session.run_config(), context={})
    assert [summarize(i) for i in legacy.items] == ["user:hi", "assistant:hello"]


async def test_legacy_session_without_limit_is_reconciled(tmp_path: Path) -> None:
    """A session whose get_items takes no limit is read whole and still classified."""
    legacy = LegacySession()
    faulty = FaultInjectingSession(legacy)
    faulty.get_items = legacy.get_items  # type: ignore[method-assign]
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=tmp_path / "j.db"))
    await session.add_items([USER])
    faulty.plan(Fault.LOST_ACK)
    with pytest.raises(BackendFailure):
        await session.add_items([ANSWER])
    decisions = await session.reconcile()
    assert [d.outcome for d in decisions] == [Outcome.COMMITTED]
    assert legacy.items == [USER, ANSWER]


async def test_capability_hooks_are_forwarded_only_where_the_inner_session_has_them(
    tmp_path: Path,
) -> None:
    """Compaction and generation hooks appear on the wrapper exactly when the inner has them."""
    plain, _, _ = wrapped(tmp_path)
    assert not is_openai_responses_compaction_aware_session(plain)
    for name in ("run_compaction", "_get_items_with_generation", "_add_items_with_generation"):
        assert not hasattr(plain, name)
    with pytest.raises(AttributeError):
        _ = plain.some_store_internal  # type: ignore[attr-defined]

    class Compacting(WrapperAwareSession):
        compactions = 0

        async def run_compaction(self, args: Any = None) -> None:
            self.compactions += 1

    inner = Compacting()
    session = ReconcilingSession(inner, config=ReconcileConfig(journal=tmp_path / "j.db"))
    assert is_openai_responses_compaction_aware_session(session)
    await session.run_compaction()  # type: ignore[attr-defined]
    assert inner.compactions == 1


async def test_refuses_sessions_it_cannot_reconcile(tmp_path: Path) -> None:
    """A double wrap and a non-session are refused with typed errors."""
    session, _, _ = wrapped(tmp_path)
    with pytest.raises(ConfigurationError):
        ReconcilingSession(session)
    with pytest.raises(UnsupportedSession):
        ReconcilingSession(object())


@pytest.mark.parametrize("value", ["0", "false", "OFF", "No"])
async def test_environment_flag_makes_a_pure_pass_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """AGENTS_RECONCILE=0/false/off/no overrides enabled=True: no journal, no notes, no gate."""
    monkeypatch.setenv("AGENTS_RECONCILE", value)
    session, faulty, _inner = wrapped(tmp_path)
    assert not session.enabled
    base = RunConfig(workflow_name="mine")
    assert session.run_config(base) is base
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure) as raised:
        await session.add_items([USER])
    assert not getattr(raised.value, "__notes__", [])
    assert not (tmp_path / "journal.db").exists()
    assert await session.reconcile() == []


async def test_enabled_false_is_a_pass_through(tmp_path: Path) -> None:
    """ReconcileConfig(enabled=False) writes straight through and records nothing."""
    session, _, inner = wrapped(tmp_path, enabled=False)
    await session.add_items([USER])
    assert await inner.get_items() == [USER]
    assert not (tmp_path / "journal.db").exists()


async def test_failed_append_reraises_the_backend_error_with_a_note(tmp_path: Path) -> None:
    """The caller gets the backend's own exception, noted with the pending intent's id."""
    session, faulty, _ = wrapped(tmp_path)
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure) as raised:
        await session.add_items([USER])
    [pending] = await session.pending()
    assert any(pending.intent_id in note for note in raised.value.__notes__)


async def settles_as(
    session: ReconcilingSession, states: list[IntentState], seconds: float = 30
) -> bool:
    """Whether the session's pending intents come to be in ``states`` within ``seconds``
    (waited for, not slept: a loaded machine takes longer)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if [e.state for e in await session.journal.pending("s1")] == states:
            return True
        await asyncio.sleep(0.02)
    return False


async def test_write_ahead_intent_is_durable_before_the_append(tmp_path: Path) -> None:
    """Under write_ahead the journal holds the intent, in flight, while the inner append runs;
    a cancelled caller's write is waited out (in_flight_wait) before it is marked cancelled."""
    session, faulty, _ = wrapped(tmp_path, in_flight_wait=0.5)
    hang = faulty.plan(Fault.HANG)
    task = asyncio.create_task(session.add_items([USER]))
    await asyncio.wait_for(hang.fired.wait(), 30)  # the inner append has begun
    entries = await session.journal.pending("s1")
    assert [e.state for e in entries] == [IntentState.IN_FLIGHT]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [e.state for e in await session.journal.pending("s1")] == [IntentState.IN_FLIGHT]
    assert await settles_as(session, [IntentState.CANCELLED])


async def test_a_cancelled_append_is_uncertain_and_reconciled(tmp_path: Path) -> None:
    """A cancelled append stays pending and the next use replays it once (once its write,
    which never returns, was waited out)."""
    session, faulty, _inner = wrapped(tmp_path, in_flight_wait=0.2)
    hang = faulty.plan(Fault.HANG)
    task = asyncio.create_task(session.add_items([USER]))
    await asyncio.wait_for(hang.fired.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await settles_as(session, [IntentState.CANCELLED])
    assert await session.get_items() == [USER]
    assert [d.action for d in await session.decisions()] == [Action.REPLAYED]


async def test_replayed_batch_is_not_appended_twice(tmp_path: Path) -> None:
    """add_items of the batch that was just settled, while history still ends with it, is
    skipped; anything else is appended."""
    session, faulty, inner = wrapped(tmp_path)
    faulty.plan(Fault.LOST_ACK)
    with pytest.raises(BackendFailure):
        await session.add_items([USER])
    await session.add_items([USER])
    assert await inner.get_items() == [USER]
    await session.add_items([USER])
    assert await inner.get_items() == [USER, USER], "only the first repeat is merged"


async def test_merge_retried_input_can_be_switched_off(tmp_path: Path) -> None:
    """With merge_retried_input=False a repeat after a settled write is appended."""
    session, faulty, inner = wrapped(tmp_path, merge_retried_input=False)
    faulty.plan(Fault.LOST_ACK)
    with pytest.raises(BackendFailure):
        await session.add_items([USER])
    await session.add_items([USER])
    assert await inner.get_items() == [USER, USER]


async def test_on_unchanged_fail_leaves_the_choice_to_an_operator(tmp_path: Path) -> None:
    """on_unchanged='fail' denies with operator_required and keeps the intent pending."""
    session, faulty, inner = wrapped(tmp_path, on_unchanged="fail")
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await session.add_items([USER])
    with pytest.raises(ContinuationDenied) as denied:
        await session.get_items()
    assert denied.value.decision.reason is Reason.OPERATOR_REQUIRED
    assert denied.value.decision.outcome is Outcome.UNCHANGED
    assert len(await session.pending()) == 1
    assert await inner.get_items() == []


async def test_pending_lists_without_reconciling(tmp_path: Path) -> None:
    """pending() reports the unresolved intent and changes nothing; reconcile() settles it."""
    session, faulty, inner = wrapped(tmp_path)
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await session.add_items([USER, ANSWER])
    [intent] = await session.pending()
    assert intent.batch == (USER, ANSWER) and intent.session_id == "s1"
    assert await inner.get_items() == []
    [decision] = await session.reconcile()
    assert decision.action is Action.REPLAYED
    assert await session.pending() == []
    assert await inner.get_items() == [USER, ANSWER]


async def test_pop_and_clear_settle_first(tmp_path: Path) -> None:
    """pop_item and clear_session reconcile pending intents before they act."""
    session, faulty, inner = wrapped(tmp_path)
    await session.add_items([USER])
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await session.add_items([ANSWER])
    assert await session.pop_item() == ANSWER
    assert await inner.get_items() == [USER]
    faulty.plan(Fault.CONCURRENT_WRITER)
    with pytest.raises(BackendFailure):
        await session.add_items([ANSWER])
    with pytest.raises(ContinuationDenied):
        await session.clear_session()
    assert len(await inner.get_items()) == 2, "a denied clear leaves history untouched"


async def test_gate_composes_with_the_users_filter_and_callback(tmp_path: Path) -> None:
    """The user's call_model_input_filter and session_input_callback still run, after the gate."""
    session, _, _ = wrapped(tmp_path)
    seen: list[str] = []

    def user_filter(data: CallModelData[Any]) -> ModelInputData:
        seen.append("filter")
        return data.model_data

    def user_callback(history: list[Any], new: list[Any]) -> list[Any]:
        seen.append("callback")
        return history + new

    base = RunConfig(
        call_model_input_filter=user_filter,
        session_input_callback=user_callback,
        workflow_name="kept",
    )
    config = session.run_config(base)
    assert config.workflow_name == "kept"
    agent, _ = text_agent("hello")
    await Runner.run(agent, "hi", session=session, run_config=config)
    assert seen == ["callback", "filter"]


async def test_hooks_gate_denies_before_the_model_and_delegates(tmp_path: Path) -> None:
    """session.hooks(base) gates on_llm_start and passes every hook on to the user's hooks."""
    calls: list[str] = []

    class Mine(RunHooks[Any]):
        async def on_llm_start(self, *args: Any, **kwargs: Any) -> None:
            calls.append("llm_start")

        async def on_agent_start(self, *args: Any, **kwargs: Any) -> None:
            calls.append("agent_start")

    session, faulty, _inner = wrapped(tmp_path)
    agent, model = text_agent("hello")
    await Runner.run(agent, "hi", session=session, hooks=session.hooks(Mine()))
    assert calls == ["agent_start", "llm_start"]

    # An ambiguous intent appearing between the history read and the model call is caught
    # by the hook itself.
    calls.clear()
    other = ReconcilingSession(faulty, config=session.config)
    agent, model = text_agent("never")

    class Sneaky(RunHooks[Any]):
        async def on_agent_start(self, *args: Any, **kwargs: Any) -> None:
            faulty.plan(Fault.CONCURRENT_WRITER)
            with pytest.raises(BackendFailure):
                await other.add_items([ANSWER])

    with pytest.raises(ContinuationDenied):
        await Runner.run(agent, "again", session=session, hooks=session.hooks(Sneaky()))
    assert model.calls == ()


async def test_live_foreign_in_flight_intent_is_waited_for_then_denied(tmp_path: Path) -> None:
    """An in-flight intent of a live worker elsewhere is never replayed: the gate waits,
    then denies with in_flight_elsewhere."""
    session, _, inner = wrapped(tmp_path, in_flight_wait=0.1)
    intent = await recorded_intent(session, Owner(host="other-host#x", pid=1, started="1"))
    started = time.monotonic()
    with pytest.raises(ContinuationDenied) as denied:
        await session.get_items()
    assert time.monotonic() - started >= 0.1
    assert denied.value.decision.reason is Reason.IN_FLIGHT_ELSEWHERE
    assert denied.value.intent_id == intent.intent_id
    assert await inner.get_items() == []


async def test_dead_owners_in_flight_intent_is_reconciled(tmp_path: Path) -> None:
    """An in-flight intent whose owner process is gone (same host, no such pid) is settled."""
    session, _, _inner = wrapped(tmp_path)
    me = current_owner()
    await recorded_intent(session, Owner(host=me.host, pid=2**22 + 7, started="1"))
    assert await session.get_items() == [USER]
    assert await session.pending() == []


async def test_expired_lease_of_a_foreign_worker_is_not_taken_on_the_sdks_session(
    tmp_path: Path,
) -> None:
    """A foreign in-flight intent older than lease_seconds may belong to a stalled worker:
    on a store that cannot fence its late write it is denied, never replayed (see
    tests/session/test_leases.py for the revisioned stores, which take it over)."""
    session, _, inner = wrapped(tmp_path, lease_seconds=0.05, in_flight_wait=0.1)
    await recorded_intent(session, Owner(host="other-host#x", pid=1, started="1"))
    await asyncio.sleep(0.1)
    with pytest.raises(ContinuationDenied) as denied:
        await session.get_items()
    assert denied.value.decision.reason is Reason.LEASE_EXPIRED
    assert await inner.get_items() == []


async def recorded_intent(session: ReconcilingSession, owner: Owner) -> PendingWrite:
    from agents_reconcile._core.fingerprint import digest_items

    intent = PendingWrite(
        intent_id="foreign-1",
        session_id=session.session_id,
        backend=session.backend_identity,
        batch=(USER,),
        batch_digests=digest_items([USER]),
        before_digests=(),
        before_is_whole=True,
        created_at=time.time(),
        persisted_count=0,
    )
    await session.journal.record(intent, state=IntentState.IN_FLIGHT, owner=owner)
    return intent


async def test_unreadable_journal_stops_the_gate(tmp_path: Path) -> None:
    """A journal that stays unavailable is retried briefly, then reported; no model call."""

    class Down(MemoryJournal):
        attempts = 0

        async def pending(self, *args: Any, **kwargs: Any) -> Any:
            self.attempts += 1
            raise JournalUnavailable("journal is down")

    journal = Down()
    session, _, _ = wrapped(tmp_path, journal=journal, journal_retries=3)
    agent, model = text_agent("never")
    with pytest.raises(JournalUnavailable):
        await Runner.run(agent, "hi", session=session, run_config=session.run_config())
    assert journal.attempts == 3
    assert model.calls == ()


class FlakyOpenings(MemoryJournal):
    """A journal on the event loop (it starts eagerly) whose first ``down`` openings fail as
    unavailable; whether each suspends first (``suspend``) is the test's choice."""

    def __init__(self, down: int, *, suspend: bool) -> None:
        super().__init__()
        self.down = down
        self.suspend = suspend
        self.openings = 0

    async def open_intent(self, *args: Any, **kwargs: Any) -> Any:
        self.openings += 1
        if self.suspend:
            await asyncio.sleep(0)
        if self.openings <= self.down:
            raise JournalUnavailable("journal is down")
        return await super().open_intent(*args, **kwargs)


@pytest.mark.parametrize("suspend", [False, True], ids=["answers-at-once", "suspends"])
async def test_an_opening_the_journal_refuses_as_unavailable_is_retried_journal_retries_times(
    tmp_path: Path, suspend: bool
) -> None:
    """An opening started in the caller (a journal on the event loop) that fails as
    unavailable is retried like any journal call: two failures and a success store the batch
    once, in three attempts; three failures raise after exactly three attempts, nothing
    stored and nothing pending."""
    journal = FlakyOpenings(2, suspend=suspend)
    session, _, inner = wrapped(tmp_path, journal=journal, journal_retries=3)
    await session.add_items([dict(USER)])
    assert journal.openings == 3
    assert await inner.get_items() == [USER]

    down = FlakyOpenings(3, suspend=suspend)
    (tmp_path / "b").mkdir()
    other, _, other_inner = wrapped(tmp_path / "b", journal=down, journal_retries=3)
    with pytest.raises(JournalUnavailable):
        await other.add_items([dict(USER)])
    assert down.openings == 3
    assert await other_inner.get_items() == []
    assert await other.pending() == []


class OpeningsLoseTheirReply(MemoryJournal):
    """A journal whose first ``lost`` openings are recorded and then lose their reply on
    every attempt (a journal server failing over right after the write, say)."""

    def __init__(self, lost: int) -> None:
        super().__init__()
        self.lost = lost
        self.openings = 0

    async def open_intent(self, *args: Any, **kwargs: Any) -> Any:
        self.openings += 1
        opened = await super().open_intent(*args, **kwargs)
        if self.openings <= self.lost:
            raise JournalUnavailable("the reply was lost")
        return opened


async def test_an_opening_recorded_with_its_reply_lost_is_never_left_to_be_replayed(
    tmp_path: Path,
) -> None:
    """The journal recorded an append's intent and lost every reply: the caller is told that
    nothing of its batch was written, and the intent is cleared before the wrapper's next
    append, never left in flight to be taken over and replayed (which would store the batch
    twice once the caller sent it again)."""
    journal = OpeningsLoseTheirReply(3)
    session, _, inner = wrapped(tmp_path, journal=journal, journal_retries=3)
    with pytest.raises(JournalUnavailable) as raised:
        await session.add_items([dict(USER)])
    assert any("nothing of its batch was written" in note for note in raised.value.__notes__)
    assert await inner.get_items() == []

    await session.add_items([dict(USER)])  # the caller sends it again
    assert await inner.get_items() == [USER]
    assert await journal.pending(None) == [], "no intent left for another worker to replay"


async def test_backend_identity(tmp_path: Path) -> None:
    """Identity names the store type and file, is stable, differs per file, hides credentials,
    and can be set."""
    a1 = ReconcilingSession(SQLiteSession("x", tmp_path / "a.db")).backend_identity
    a2 = ReconcilingSession(SQLiteSession("y", tmp_path / "a.db")).backend_identity
    b = ReconcilingSession(SQLiteSession("x", tmp_path / "b.db")).backend_identity
    assert a1 == a2 and a1 != b
    assert a1.kind == "agents.memory.sqlite_session.SQLiteSession"
    assert str((tmp_path / "a.db").resolve()) in a1.namespace

    from agents.extensions.memory import EncryptedSession
    from sqlalchemy.engine import make_url

    encrypted = EncryptedSession(
        session_id="x",
        underlying_session=SQLiteSession("x", tmp_path / "a.db"),
        encryption_key="k" * 32,
    )
    assert ReconcilingSession(encrypted).backend_identity == a1

    class EngineStore(LegacySession):
        """A store that, like SQLAlchemySession, keeps its engine (and its URL) in _engine."""

        def __init__(self) -> None:
            super().__init__()
            self._engine = type("Engine", (), {})()
            self._engine.url = make_url("postgresql+asyncpg://alice:s3cret@127.0.0.1:5432/app")

    identity = ReconcilingSession(EngineStore()).backend_identity
    assert "s3cret" not in str(identity) and "alice" not in str(identity)
    assert "127.0.0.1:5432/app" in identity.namespace

    custom = ReconcilingSession(
        LegacySession(), config=ReconcileConfig(backend_identity="my.Store|tenant-7")
    )
    assert custom.backend_identity == BackendIdentity("my.Store", "tenant-7")


def test_exported_names_are_the_documented_ones() -> None:
    """The package exports exactly its documented public names."""
    import agents_reconcile

    public = {name for name in dir(agents_reconcile) if not name.startswith("_")}
    assert set(agents_reconcile.__all__) <= public
    for name in (
        "ReconcilingSession",
        "ReconcileConfig",
        "ContinuationDenied",
        "BindingMismatch",
        "PendingWrite",
        "Decision",
        "BackendIdentity",
        "Outcome",
        "IntentJournal",
        "SQLiteJournal",
        "MemoryJournal",
        "LeaseLost",
        "RevisionConflict",
        "SchemaMismatch",
        "PayloadKeyUnknown",
    ):
        assert name in agents_reconcile.__all__
    for internal in ("classify", "crashpoints", "Observation", "item_digest"):
        assert internal not in agents_reconcile.__all__


async def test_config_rejects_bad_values() -> None:
    """Misspelt options fail at construction with ConfigurationError."""
    with pytest.raises(ConfigurationError, match="was removed"):
        ReconcileConfig(durability="on_failure")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        ReconcileConfig(on_unchanged="maybe")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        ReconcileConfig(journal=42)  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore::agents_reconcile.UngatedRunWarning")
async def test_recorded_batch_is_detached_from_the_callers_items(tmp_path: Path) -> None:
    """Mutating the items after a failed append changes neither the intent nor its replay."""
    session, faulty, inner = wrapped(tmp_path)
    item = {"role": "user", "content": "original"}
    context: dict[str, Any] = {}

    class Wrapper:
        def __init__(self) -> None:
            self.context = context

    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await session.add_items([item], wrapper=Wrapper())  # type: ignore[arg-type]
    item["content"] = "changed by the caller"
    context["agents_reconcile"]["pending"][0]["batch"][0]["content"] = "changed in the context"
    [intent] = await session.pending()
    assert intent.batch == ({"role": "user", "content": "original"},)
    await session.reconcile()
    assert await inner.get_items() == [{"role": "user", "content": "original"}]


async def test_closing_a_shared_journal_does_not_break_other_sessions(tmp_path: Path) -> None:
    """Sessions on one journal file share it; closing it from one leaves the other working."""
    first, _, _ = wrapped(tmp_path)
    second = ReconcilingSession(
        SQLiteSession("s2", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "journal.db"),
    )
    assert first.journal is second.journal
    await first.journal.close()
    await second.add_items([USER])
    await first.add_items([ANSWER])
    assert await second.get_items() == [USER]


def test_run_sync_across_event_loops(tmp_path: Path) -> None:
    """Runner.run_sync (a new event loop per call) records, reconciles and gates as run does."""
    session, faulty, inner = wrapped(tmp_path)
    agent, _ = text_agent("first")
    faulty.plan(Fault.REJECT, at=2)
    with pytest.raises(BackendFailure):
        Runner.run_sync(agent, "hi", session=session, run_config=session.run_config())
    agent, model = text_agent("second")
    Runner.run_sync(agent, "again", session=session, run_config=session.run_config())
    stored = [summarize(item) for item in asyncio.run(inner.get_items())]
    assert stored == ["user:hi", "assistant:first", "user:again", "assistant:second"]
    assert len(model.calls) == 1


async def test_switched_off_reading_creates_no_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With reconciliation off, pending() and decisions() read nothing into existence."""
    monkeypatch.setenv("AGENTS_RECONCILE", "0")
    session = ReconcilingSession(SQLiteSession("s", tmp_path / "chat.db"))
    assert await session.pending() == []
    assert await session.decisions() == []
    assert not (tmp_path / "agents-reconcile.db").exists()


async def test_a_chunking_store_is_refused_behind_other_wrappers() -> None:
    """OpenAIConversationsSession is refused when another session wraps it: the SDK's checks of
    its type would not see it, and its requests would be the other session's to make."""
    from openai import AsyncOpenAI

    conversations = OpenAIConversationsSession(
        conversation_id="conv_1",
        openai_client=AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9"),
    )
    with pytest.raises(UnsupportedSession, match="wraps an OpenAIConversationsSession"):
        ReconcilingSession(FaultInjectingSession(conversations))


async def test_installing_the_gate_twice_leaves_one_gate(tmp_path: Path) -> None:
    """run_config(run_config()) keeps a single gate for the session."""
    session, _, _ = wrapped(tmp_path)
    once = session.run_config()
    assert session.run_config(once) is once
