"""``session=`` alone is enough once the gate is installed in the SDK's default runner.

Each scenario runs in both forms, by hand (``run_config=session.run_config()`` and
``hooks=session.hooks()``) and installed (``session=`` alone), with the same expectations;
the comparison tests run both and compare what they stored and what the model saw.
"""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, RunHooks, Runner
from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ScriptedModel, assistant_message

import agents_reconcile
from agents_reconcile import (
    ContinuationDenied,
    Outcome,
    Reason,
    ReconcileConfig,
    ReconcilingSession,
    UngatedRunWarning,
)
from agents_reconcile._session.default_runner import ENV_INSTALL, ReconcilingRunner

from ..support.backends import BACKENDS
from ..support.runner_support import FIRST_RUN, World, first_run_steps, model_input, resume_state
from .test_approval_composition import interrupted_run
from .test_runner_matrix import fail_first_run

FORMS = ["by_hand", "installed"]


@pytest.fixture(autouse=True)
def restore_default_runner():
    """Every test leaves the SDK's default runner as it found it."""
    before = get_default_agent_runner()
    yield
    set_default_agent_runner(before)


@pytest.fixture
async def world(tmp_path: Path) -> Any:
    world = World(BACKENDS[0], tmp_path)
    yield world
    await world.close()


async def run_in(
    form: str,
    agent: Agent[Any],
    start: Any,
    session: ReconcilingSession,
    *,
    how: str = "run",
    context: Any = None,
) -> Any:
    """Run to the end in one form: ``how`` is ``run``, ``streamed`` or ``sync``."""
    if form == "installed":
        agents_reconcile.install()
        kwargs: dict[str, Any] = {"session": session, "context": context}
    else:
        agents_reconcile.uninstall()
        kwargs = {
            "session": session,
            "context": context,
            "run_config": session.run_config(),
            "hooks": session.hooks(),
        }
    if how == "streamed":
        result = Runner.run_streamed(agent, start, **kwargs)
        async for _ in result.stream_events():
            pass
        return result
    if how == "sync":
        # run_sync runs its own event loop: in a thread of its own, as a sync caller would.
        return await asyncio.to_thread(Runner.run_sync, agent, start, **kwargs)
    return await Runner.run(agent, start, **kwargs)


async def retried_input(world: World, form: str, how: str) -> tuple[list[str], list[str]]:
    """The input's save loses its acknowledgement; the user sends the same input again."""
    session = await world.start()
    assert world.faulty is not None
    world.faulty.plan(agents_reconcile.testing.Fault.LOST_ACK, at=1)
    agent, _ = world.agent([[assistant_message("x")]])
    with pytest.raises(ConnectionError):
        await run_in(form, agent, "hi", session, how="run")
    agent, model = world.agent([[assistant_message("ok")]])
    await run_in(form, agent, "hi", session, how=how)
    return await world.history(), model_input(model)


@pytest.mark.parametrize("how", ["run", "streamed", "sync"])
async def test_a_retried_input_reaches_the_model_once_in_both_forms(tmp_path: Path, how: str):
    """Fresh runs: the retried input is stored once and seen once, with ``session=`` alone
    exactly as with the config and hooks passed by hand."""
    outcomes = []
    for form in FORMS:
        world = World(BACKENDS[0], tmp_path / form)
        (tmp_path / form).mkdir()
        try:
            outcomes.append(await retried_input(world, form, how))
        finally:
            await world.close()
    assert outcomes[0] == outcomes[1] == (["user:hi", "assistant:ok"], ["user:hi"])


async def test_without_the_gate_a_retried_input_reaches_the_model_twice(world: World):
    """The reason for the switch: ``session=`` alone, not installed, lets the model see the
    retried input twice (and warns that the gate is missing)."""
    session = await world.start()
    assert world.faulty is not None
    world.faulty.plan(agents_reconcile.testing.Fault.LOST_ACK, at=1)
    agent, _ = world.agent([[assistant_message("x")]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ConnectionError):
            await Runner.run(agent, "hi", session=session)
        agent, model = world.agent([[assistant_message("ok")]])
        await Runner.run(agent, "hi", session=session)
    assert model_input(model) == ["user:hi", "user:hi"]
    assert [w for w in caught if issubclass(w.category, UngatedRunWarning)]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("how", ["run", "streamed"])
async def test_a_resumed_run_on_a_changed_history_is_denied_before_the_model(
    world: World, form: str, how: str
):
    """A RunState resumed after another writer changed the history: denied before any
    model call, in both forms."""
    state_text = await fail_first_run(
        world, 2, agents_reconcile.testing.Fault.CONCURRENT_WRITER, streamed=True
    )
    assert state_text is not None
    session = await world.restart()
    agent, model = world.agent(first_run_steps()[1:])
    state = await resume_state(agent, state_text)
    with pytest.raises(ContinuationDenied) as denied:
        await run_in(form, agent, state, session, how=how)
    assert denied.value.decision.reason is Reason.HISTORY_CHANGED
    assert model.calls == ()


@pytest.mark.parametrize("how", ["run", "streamed"])
async def test_a_resumed_rejected_save_is_replayed_once_in_both_forms(tmp_path: Path, how: str):
    """A RunState resumed after its tool turn's save was rejected: replayed once, the tool
    ran once, the model saw what is stored; the same in both forms."""
    outcomes = []
    for form in FORMS:
        (tmp_path / form).mkdir()
        world = World(BACKENDS[0], tmp_path / form)
        try:
            text = await fail_first_run(
                world, 2, agents_reconcile.testing.Fault.REJECT, streamed=True
            )
            assert text is not None
            session = await world.restart()
            agent, model = world.agent(first_run_steps()[1:])
            await run_in(form, agent, await resume_state(agent, text), session, how=how)
            decisions = [(d.outcome, d.reason) for d in await session.decisions()]
            outcomes.append((await world.history(), model_input(model), world.charges, decisions))
        finally:
            await world.close()
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == FIRST_RUN and outcomes[0][2] == [5]
    assert outcomes[0][3] == [(Outcome.UNCHANGED, Reason.BATCH_ABSENT)]


@pytest.mark.parametrize("form", FORMS)
async def test_an_old_checkpoint_never_runs_its_approved_tool_again(world: World, form: str):
    """The tool hooks come with the switch too: resuming an approval checkpoint a second time
    is refused before the approved tool runs again."""
    agent, _, text = await interrupted_run(world)
    await run_in(form, agent, await resume_state(agent, text), await world.restart())
    assert world.charges == [5]
    with pytest.raises(ContinuationDenied) as denied:
        await run_in(form, agent, await resume_state(agent, text), await world.restart())
    assert denied.value.decision.reason is Reason.STALE_STATE
    assert world.charges == [5]


# -- composing with what the caller gave ---------------------------------------------------


async def test_the_callers_config_and_hooks_keep_working_installed(world: World):
    """Installed, the caller's own filter and hooks still run, once each, around the gate."""
    agents_reconcile.install()
    session = await world.start()
    filtered: list[int] = []
    started: list[str] = []

    def mine(data: CallModelData[Any]) -> ModelInputData:
        filtered.append(len(data.model_data.input))
        return data.model_data

    class Hooks(RunHooks[Any]):
        async def on_llm_start(self, context: Any, agent: Any, *args: Any) -> None:
            started.append(agent.name)

    agent, _ = world.agent([[assistant_message("ok")]])
    config = RunConfig(call_model_input_filter=mine, workflow_name="mine")
    await Runner.run(agent, "hi", session=session, run_config=config, hooks=Hooks())
    assert filtered == [1] and started == ["assistant"]
    # Passing the by-hand forms as well leaves one gate, not two.
    agent, _ = world.agent([[assistant_message("ok")]])
    await Runner.run(
        agent,
        "again",
        session=session,
        run_config=session.run_config(config),
        hooks=session.hooks(Hooks()),
    )
    assert filtered == [1, 3] and started == ["assistant", "assistant"]


async def test_no_config_still_means_no_config(world: World):
    """A run given no ``run_config`` (or a mapping without a model provider) still lets the
    SDK own and close the provider it makes: the gate goes in as a mapping."""
    runner = ReconcilingRunner(AgentRunner())
    session = await world.start()
    gated = runner.gated({"session": session})
    assert isinstance(gated["run_config"], dict)
    assert "model_provider" not in gated["run_config"]
    assert gated["run_config"]["call_model_input_filter"] is not None
    gated = runner.gated({"session": session, "run_config": {"workflow_name": "w"}})
    assert gated["run_config"]["workflow_name"] == "w"
    assert "model_provider" not in gated["run_config"]
    # Other sessions, and runs without one, pass through untouched.
    untouched = {"session": None, "run_config": None}
    assert runner.gated(untouched) is untouched


async def test_a_runner_installed_before_stays_behind_the_gate(world: World):
    """Another integration's default runner keeps running every call; install and uninstall
    compose with it and give it back."""
    seen: list[str] = []

    class Theirs(AgentRunner):
        async def run(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
            seen.append("theirs")
            return await super().run(starting_agent, input, **kwargs)

    theirs = Theirs()
    set_default_agent_runner(theirs)
    assert agents_reconcile.install() is True
    assert agents_reconcile.install() is True  # idempotent
    assert isinstance(get_default_agent_runner(), ReconcilingRunner)
    assert get_default_agent_runner().base is theirs  # type: ignore[attr-defined]
    session = await world.start()
    agent, _ = world.agent([[assistant_message("ok")]])
    await Runner.run(agent, "hi", session=session)
    assert seen == ["theirs"]
    agents_reconcile.uninstall()
    assert get_default_agent_runner() is theirs
    assert not agents_reconcile.installed()


async def test_a_runner_installed_after_keeps_ours_in_the_chain(world: World):
    """Installed over ours, another runner wraps it; uninstall then only switches ours to
    pass-through, so theirs keeps working."""

    class Wrapping(AgentRunner):
        def __init__(self, base: Any) -> None:
            self.base = base

        async def run(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
            return await self.base.run(starting_agent, input, **kwargs)

    agents_reconcile.install()
    outer = Wrapping(get_default_agent_runner())
    set_default_agent_runner(outer)
    assert agents_reconcile.installed()
    agents_reconcile.uninstall()
    assert get_default_agent_runner() is outer and not agents_reconcile.installed()
    agents_reconcile.install()
    assert agents_reconcile.installed() and get_default_agent_runner() is outer


# -- switching it on -----------------------------------------------------------------------


async def test_the_config_flag_installs_the_gate(tmp_path: Path):
    agents_reconcile.uninstall()
    from agents.memory import SQLiteSession

    ReconcilingSession(
        SQLiteSession("s", tmp_path / "s.db"),
        config=ReconcileConfig(journal=tmp_path / "j.db", install=True),
    )
    assert agents_reconcile.installed()


async def test_the_environment_installs_the_gate(tmp_path: Path, monkeypatch):
    agents_reconcile.uninstall()
    from agents.memory import SQLiteSession

    monkeypatch.setenv(ENV_INSTALL, "1")
    ReconcilingSession(
        SQLiteSession("s", tmp_path / "s.db"), config=ReconcileConfig(journal=tmp_path / "j.db")
    )
    assert agents_reconcile.installed()


async def test_a_gated_run_is_not_warned_about(world: World):
    session = await world.start()
    agent, _ = world.agent([[assistant_message("ok")]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UngatedRunWarning)
        await Runner.run(agent, "hi", session=session, run_config=session.run_config())
        agents_reconcile.install()
        other = await world.restart()
        agent, _ = world.agent([[assistant_message("ok")]])
        await Runner.run(agent, "again", session=other)


async def test_a_model_with_the_gate_installed_sees_nothing_else_changed(world: World):
    """Installed, a clean run stores and shows the model what an unwrapped run does."""
    agents_reconcile.install()
    session = await world.start()
    model = ScriptedModel([[assistant_message("ok")]])
    result = await Runner.run(Agent(name="a", model=model), "hi", session=session)
    assert result.final_output == "ok"
    assert await world.history() == ["user:hi", "assistant:ok"]
    assert model_input(model) == ["user:hi"]
