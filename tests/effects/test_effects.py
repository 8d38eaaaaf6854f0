"""Effect tools on the real runner (run and streamed, resumed from ``RunState.to_string()``
after an approval): the body runs once per idempotency key, a receipt makes a later call
return the recorded output without running it, an intent without a receipt is settled by the
tool's ``check``, re-run when the tool is idempotent, or refused before the body runs."""

from __future__ import annotations

import asyncio
import contextvars
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunState, SQLiteSession
from agents.testing import ScriptedModel, assistant_message, function_call
from pydantic import BaseModel

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.memory.journal import MemoryJournal
from agents_reconcile._core.effect_records import EffectState, effect_key
from agents_reconcile._effects.tool import NOT_FOUND, current_effect, effect_tool
from agents_reconcile.errors import ConfigurationError, EffectUnknown

from ..support.runner_support import run


class Charge(BaseModel):
    """A processor's answer, as a model (not text)."""

    ref: str
    amount: int


class Payments:
    """A card processor that dedupes on an idempotency key, and counts what it was asked."""

    def __init__(self) -> None:
        self.charges: list[tuple[str, int]] = []
        self.fail_after_charge = 0

    def charge(self, key: str, amount: int) -> str:
        self.charges.append((key, amount))
        if self.fail_after_charge:
            self.fail_after_charge -= 1
            raise ConnectionError("the reply was lost after the charge")
        return f"charged {amount}"

    def find(self, key: str) -> Any:
        for charged, amount in self.charges:
            if charged == key:
                return f"charged {amount}"
        return NOT_FOUND


def session_at(tmp_path: Path) -> ReconcilingSession:
    return ReconcilingSession(
        SQLiteSession("user-42", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "journal.db"),
    )


def charging_agent(payments: Payments, steps: list[Any], **options: Any) -> Agent[Any]:
    @effect_tool(**options)
    def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        return payments.charge(current_effect().key, amount)

    return Agent(name="a", model=ScriptedModel(steps), tools=[charge_card])


def steps() -> list[Any]:
    return [
        [function_call("charge_card", {"amount": 5}, call_id="c1")],
        [assistant_message("done")],
    ]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_the_body_runs_once_and_its_receipt_is_kept(tmp_path: Path, streamed: bool) -> None:
    payments = Payments()
    session = session_at(tmp_path)
    await run(charging_agent(payments, steps()), "pay", session, streamed=streamed)
    key = effect_key("user-42", "c1", "charge_card", '{"amount":5}')
    assert payments.charges == [(key, 5)], "the body saw the effect's key"
    [effect] = await session.journal.effects.of_session("user-42")  # type: ignore[attr-defined]
    assert (effect.key, effect.state, effect.output) == (key, EffectState.DONE, "charged 5")


async def approval_state(tmp_path: Path, payments: Payments, **options: Any) -> str:
    session = session_at(tmp_path)
    agent = charging_agent(payments, steps(), needs_approval=True, **options)
    result = await run(agent, "pay", session, streamed=False)
    assert result.interruptions and payments.charges == []
    state_text: str = result.to_state().to_string()
    return state_text


async def resume(
    tmp_path: Path, payments: Payments, state_text: str, *, streamed: bool, **options: Any
) -> Any:
    """Approve and resume the checkpoint as a new process would: in a context of its own
    (nothing marked by earlier runs of this test), with a new wrapper."""
    agent = charging_agent(payments, [[assistant_message("done")]], needs_approval=True, **options)
    state = await RunState.from_string(agent, state_text)
    for interruption in state.get_interruptions():
        state.approve(interruption)
    fresh = contextvars.Context()
    return await asyncio.create_task(
        run(agent, state, session_at(tmp_path), streamed=streamed), context=fresh
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_receipt_answers_a_resumed_checkpoint_without_running_the_body(
    tmp_path: Path, streamed: bool
) -> None:
    payments = Payments()
    state_text = await approval_state(tmp_path, payments)
    await resume(tmp_path, payments, state_text, streamed=streamed)
    assert len(payments.charges) == 1
    result = await resume(tmp_path, payments, state_text, streamed=streamed)
    assert len(payments.charges) == 1, "the same call again: the receipt, not the body"
    assert result.final_output == "done"


async def test_an_intent_without_a_receipt_is_refused_before_the_body(tmp_path: Path) -> None:
    payments = Payments()
    payments.fail_after_charge = 1
    state_text = await approval_state(tmp_path, payments)
    await resume(tmp_path, payments, state_text, streamed=False)
    assert len(payments.charges) == 1, "charged, and the reply was lost: no receipt"
    with pytest.raises(EffectUnknown) as refused:
        await resume(tmp_path, payments, state_text, streamed=False)
    assert len(payments.charges) == 1, "never charged twice"
    decision = refused.value.decision
    assert decision.reason.value == "effect_unknown"
    assert decision.evidence["tool"] == "charge_card"
    trail = await session_at(tmp_path).decisions()
    assert trail[0].intent_id == refused.value.intent_id


async def test_check_settles_an_unknown_effect_from_the_external_system(tmp_path: Path) -> None:
    payments = Payments()
    payments.fail_after_charge = 1
    state_text = await approval_state(tmp_path, payments, check=_async(payments.find))
    await resume(tmp_path, payments, state_text, streamed=False, check=_async(payments.find))
    result = await resume(
        tmp_path, payments, state_text, streamed=True, check=_async(payments.find)
    )
    assert len(payments.charges) == 1, "the processor had it: recorded, not charged again"
    assert result.final_output == "done"
    [effect] = await session_at(tmp_path).journal.effects.of_session("user-42")  # type: ignore[attr-defined]
    assert (effect.state, effect.output, effect.attempts) == (EffectState.DONE, "charged 5", 2)


async def test_check_that_finds_nothing_runs_the_body_again_under_the_same_key(
    tmp_path: Path,
) -> None:
    payments = Payments()
    state_text = await approval_state(tmp_path, payments)

    async def nothing(key: str) -> Any:
        return NOT_FOUND

    session = session_at(tmp_path)
    key = effect_key("user-42", "c1", "charge_card", '{"amount":5}')
    from agents_reconcile._core.effect_records import Effect, arguments_digest

    # A worker on another host whose lease (1 ms, stamped with its claim) ran out.
    await session.journal.effects.begin(  # type: ignore[attr-defined]
        Effect(
            key,
            "user-42",
            "charge_card",
            "c1",
            arguments_digest('{"amount":5}'),
            "gone/1/1~0.001",
            1.0,
        )
    )
    await asyncio.sleep(0.02)
    await resume(tmp_path, payments, state_text, streamed=False, check=nothing)
    assert payments.charges == [(key, 5)]


async def test_an_idempotent_tool_runs_again_with_the_same_key(tmp_path: Path) -> None:
    payments = Payments()
    payments.fail_after_charge = 1
    state_text = await approval_state(tmp_path, payments, idempotent=True)
    await resume(tmp_path, payments, state_text, streamed=False, idempotent=True)
    await resume(tmp_path, payments, state_text, streamed=False, idempotent=True)
    keys = [key for key, _ in payments.charges]
    assert len(keys) == 2 and keys[0] == keys[1], "run again, under the same key"


async def test_an_effect_tool_without_a_reconciling_session_is_refused(tmp_path: Path) -> None:
    from agents import Runner
    from agents.exceptions import UserError

    payments = Payments()
    agent = charging_agent(payments, steps())
    with pytest.raises(UserError, match="without a ReconcilingSession"):
        await Runner.run(agent, "pay", session=SQLiteSession("s", tmp_path / "c.db"))
    assert payments.charges == []


class _NoEffects(MemoryJournal):
    """An in-memory journal without an effects component."""

    def __init__(self) -> None:
        super().__init__()
        self.effects = None  # type: ignore[assignment]


async def test_an_effect_tool_on_a_journal_without_effects_is_refused_before_its_body(
    tmp_path: Path,
) -> None:
    """An effect tool whose session's journal has no effects component is refused with a
    ConfigurationError naming the component (the SDK's UserError carries it), before its body
    runs."""
    from agents import Runner
    from agents.exceptions import UserError

    payments = Payments()
    journal = _NoEffects()
    session = ReconcilingSession(
        SQLiteSession("user-42", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
    )
    with pytest.raises(UserError, match="_NoEffects has no effects component") as refused:
        await Runner.run(
            charging_agent(payments, steps()),
            "pay",
            session=session,
            run_config=session.run_config(),
        )
    assert isinstance(refused.value.__cause__, ConfigurationError)
    assert payments.charges == []


async def test_resolving_an_effect_on_a_journal_without_effects_is_refused(tmp_path: Path) -> None:
    """``resolve_effect`` on a session whose journal has no effects component raises a
    ConfigurationError naming the component, and writes no decision."""
    journal = _NoEffects()
    session = ReconcilingSession(
        SQLiteSession("user-42", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
    )
    with pytest.raises(ConfigurationError, match="has no effects component"):
        await session.resolve_effect("0" * 64, "abandon", reason="nothing there")
    assert await journal.decisions() == []


def _async(find: Any) -> Any:
    async def check(key: str) -> Any:
        return find(key)

    return check


async def test_a_replayed_tool_turn_is_vouched_for_by_its_receipt(tmp_path: Path) -> None:
    """The tool turn holding the effect's output failed to save: the next run replays it,
    because the effect's receipt holds that very output (and the body is not run again)."""
    from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

    payments = Payments()
    faulty = FaultInjectingSession(SQLiteSession("user-42", tmp_path / "chat.db"))
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=tmp_path / "journal.db"))
    faulty.plan(Fault.REJECT, at=2)
    with pytest.raises(BackendFailure):
        await run(charging_agent(payments, steps()), "pay", session, streamed=False)
    again = session_at(tmp_path)
    [decision] = await again.reconcile()
    assert decision.action.value == "replayed"
    assert len(payments.charges) == 1


async def test_an_effect_output_no_receipt_vouches_for_is_denied(tmp_path: Path) -> None:
    """A pending write holding an effect tool's output, where the effect left no receipt (or
    the receipt holds another output), is denied, not replayed: the output came from
    somewhere the receipt cannot vouch for."""
    from agents_reconcile import ContinuationDenied
    from agents_reconcile._backends.journal import IntentState
    from agents_reconcile._core.effect_records import Effect, arguments_digest
    from agents_reconcile._core.fingerprint import digest_items
    from agents_reconcile._core.ownership import current_owner
    from agents_reconcile._core.records import PendingWrite

    session = session_at(tmp_path)
    await session.add_items([{"role": "user", "content": "pay"}])
    history = await session.get_items()
    arguments = '{"amount":5}'
    call = {"type": "function_call", "call_id": "c1", "name": "charge_card", "arguments": arguments}
    for recorded_output in (None, "charged 6"):
        key = effect_key("user-42", "c1", "charge_card", arguments)
        journal: Any = session.journal
        effect = Effect(
            key, "user-42", "charge_card", "c1", arguments_digest(arguments), "x/1/1", 1.0
        )
        if (await journal.effects.get(key)) is None:
            await journal.effects.begin(effect)
        if recorded_output is not None:
            await journal.effects.finish(effect.with_receipt(recorded_output, at=2.0))
        batch = (call, {"type": "function_call_output", "call_id": "c1", "output": "charged 5"})
        intent = PendingWrite(
            intent_id=f"forged-{recorded_output}",
            session_id="user-42",
            backend=session.backend_identity,
            batch=batch,
            batch_digests=digest_items(batch),
            before_digests=digest_items(history),
            before_is_whole=True,
            created_at=3.0,
        )
        await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
        with pytest.raises(ContinuationDenied) as denied:
            await session.reconcile()
        assert denied.value.decision.reason.value == "effect_unvouched"
        assert denied.value.decision.evidence["judged"] == "unchanged"
        await session.resolve(intent.intent_id, "abandon", reason="forged output")
    assert len(await session.get_items()) == 1, "nothing replayed"


async def test_an_existing_function_tool_becomes_an_effect_tool(tmp_path: Path) -> None:
    from agents import function_tool

    from agents_reconcile._effects.tool import as_effect_tool

    payments = Payments()

    @function_tool(needs_approval=True)
    def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        return payments.charge(current_effect().key, amount)

    tool = as_effect_tool(charge_card)
    assert tool.name == charge_card.name
    assert tool.params_json_schema == charge_card.params_json_schema
    agent = Agent(name="a", model=ScriptedModel(steps()), tools=[tool])
    result = await run(agent, "pay", session_at(tmp_path), streamed=False)
    state_text = result.to_state().to_string()
    for _ in range(2):
        state = await RunState.from_string(agent, state_text)
        for interruption in state.get_interruptions():
            state.approve(interruption)
        agent.model = ScriptedModel([[assistant_message("done")]])
        await asyncio.create_task(
            run(agent, state, session_at(tmp_path), streamed=False), context=contextvars.Context()
        )
    assert len(payments.charges) == 1


@pytest.mark.parametrize("outcome", ["committed", "retry", "abandon"])
async def test_an_operator_resolves_an_unknown_effect(tmp_path: Path, outcome: str) -> None:
    """An effect refused as unknown is resolved by an operator; the next resume of the same
    checkpoint then returns the given output (committed), runs the body again under the same
    key (retry), or returns a note that it was abandoned; the trail keeps the resolution."""
    payments = Payments()
    payments.fail_after_charge = 1
    state_text = await approval_state(tmp_path, payments)
    await resume(tmp_path, payments, state_text, streamed=False)
    with pytest.raises(EffectUnknown) as refused:
        await resume(tmp_path, payments, state_text, streamed=False)
    key = refused.value.intent_id
    session = session_at(tmp_path)
    output = "charged 5 (seen at the processor)" if outcome == "committed" else None
    decision = await session.resolve_effect(
        key, outcome, reason="checked the processor", actor="ops:ana", output=output
    )
    assert (decision.action.value, decision.evidence["resolution"]) == ("resolved", outcome)
    await resume(tmp_path, payments, state_text, streamed=False)
    [effect] = await session.journal.effects.of_session("user-42")  # type: ignore[attr-defined]
    assert effect.state is EffectState.DONE
    expected_charges = 2 if outcome == "retry" else 1
    assert len(payments.charges) == expected_charges
    if outcome == "committed":
        assert effect.output == output
    if outcome == "abandon":
        assert "abandoned" in effect.output
    from agents_reconcile.errors import ResolutionRefused

    with pytest.raises(ResolutionRefused, match="receipt already"):
        await session.resolve_effect(key, "retry", reason="again")


async def test_a_receipt_written_without_the_signing_key_is_refused(tmp_path: Path) -> None:
    """Where the deployment signs, a receipt row someone wrote without the key is refused
    when read: the tool is not answered with it, and the body does not run either."""
    import sqlite3

    from agents.exceptions import UserError

    from agents_reconcile._core.effect_records import Effect, arguments_digest
    from agents_reconcile.errors import RecordUnsigned

    key_material = b"k" * 32
    payments = Payments()
    session = ReconcilingSession(
        SQLiteSession("user-42", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "journal.db", signing_key=key_material),
    )
    await session.get_items()  # the journal exists, signed
    key = effect_key("user-42", "c1", "charge_card", '{"amount":5}')
    forged = Effect(
        key, "user-42", "charge_card", "c1", arguments_digest('{"amount":5}'), "x/1/1", 1.0
    ).with_receipt("charged 5", at=2.0)
    conn = sqlite3.connect(tmp_path / "journal.db")
    conn.execute(
        "INSERT INTO effects (key, session_id, state, owner, started_at, updated_at, record)"
        " VALUES (?, 'user-42', 'done', 'x/1/1', 1.0, 2.0, ?)",
        (key, forged.encode()),
    )
    conn.commit()
    conn.close()
    with pytest.raises(RecordUnsigned):
        await session.journal.effects.get(key)  # type: ignore[attr-defined]
    with pytest.raises(UserError, match="signature"):
        await run(charging_agent(payments, steps()), "pay", session, streamed=False)
    assert payments.charges == []


def test_the_cli_shows_and_resolves_an_unknown_effect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agents_reconcile._cli import main

    payments = Payments()
    payments.fail_after_charge = 1

    async def unknown() -> tuple[str, str]:
        state_text = await approval_state(tmp_path, payments)
        await resume(tmp_path, payments, state_text, streamed=False)
        with pytest.raises(EffectUnknown) as refused:
            await resume(tmp_path, payments, state_text, streamed=False)
        return refused.value.intent_id, state_text

    key, state_text = asyncio.run(unknown())
    journal = str(tmp_path / "journal.db")
    capsys.readouterr()
    assert main(["show", key, "--journal", journal, "--json"]) == 0
    import orjson

    shown = orjson.loads(capsys.readouterr().out)
    assert (shown["tool"], shown["state"], shown["output_digest"]) == (
        "charge_card",
        "started",
        None,
    )
    assert [d["reason"] for d in shown["decisions"]] == ["effect_unknown"]
    resolve = ["resolve", key, "--as", "committed", "--output", "charged 5", "--reason", "seen"]
    code = main([*resolve, "--journal", journal])
    assert code == 0, capsys.readouterr()
    asyncio.run(resume(tmp_path, payments, state_text, streamed=False))
    assert len(payments.charges) == 1


def test_run_sync_and_tool_guardrails_behave_as_with_function_tool(tmp_path: Path) -> None:
    """``Runner.run_sync`` runs an effect tool as it runs a function tool, and the tool's own
    input guardrail still decides before the body (and before any intent is recorded)."""
    from agents import Runner, ToolGuardrailFunctionOutput, tool_input_guardrail

    payments = Payments()

    @tool_input_guardrail
    def no_big_charges(data: Any) -> ToolGuardrailFunctionOutput:
        if '"amount":500' in data.context.tool_arguments.replace(" ", ""):
            return ToolGuardrailFunctionOutput.reject_content("too big")
        return ToolGuardrailFunctionOutput.allow()

    @effect_tool(tool_input_guardrails=[no_big_charges])
    def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        return payments.charge(current_effect().key, amount)

    session = session_at(tmp_path)
    calls = [
        [function_call("charge_card", {"amount": 500}, call_id="c0")],
        [function_call("charge_card", {"amount": 5}, call_id="c1")],
        [assistant_message("done")],
    ]
    agent = Agent(name="a", model=ScriptedModel(calls), tools=[charge_card])
    result = Runner.run_sync(agent, "pay", session=session, run_config=session.run_config())
    assert result.final_output == "done"
    assert [amount for _, amount in payments.charges] == [5]
    effects = asyncio.run(session.journal.effects.of_session("user-42"))  # type: ignore[attr-defined]
    assert [e.call_id for e in effects] == ["c1"], "the guardrail refused before any intent"


async def test_two_resumes_of_one_checkpoint_at_once_run_the_body_once(tmp_path: Path) -> None:
    """Two workers of one process resume the same approval checkpoint together: one runs the
    body; the other finds the effect running under a live owner and is refused before its
    body (never asks check meanwhile, never charges)."""
    payments = Payments()
    state_text = await approval_state(tmp_path, payments)
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow_find(key: str) -> Any:
        return payments.find(key)

    @effect_tool(needs_approval=True, check=slow_find)
    async def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        started.set()
        await release.wait()
        return payments.charge(current_effect().key, amount)

    async def one() -> Any:
        agent = Agent(
            name="a", model=ScriptedModel([[assistant_message("done")]]), tools=[charge_card]
        )
        state = await RunState.from_string(agent, state_text)
        for interruption in state.get_interruptions():
            state.approve(interruption)
        return await run(agent, state, session_at(tmp_path), streamed=False)

    first = asyncio.create_task(one())
    await started.wait()
    with pytest.raises(EffectUnknown, match="effect_unknown"):
        # Bounded: a second body would wait for the release below forever.
        await asyncio.wait_for(one(), timeout=10)
    release.set()
    await first
    assert len(payments.charges) == 1


def test_an_effect_tool_takes_no_timeout() -> None:
    from agents import function_tool

    from agents_reconcile._effects.tool import as_effect_tool
    from agents_reconcile.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="no timeout"):
        effect_tool(timeout=5.0)

    @function_tool(timeout=5.0)
    async def charge(amount: int) -> str:
        """Charge."""
        return "x"

    with pytest.raises(ConfigurationError, match="no timeout"):
        as_effect_tool(charge)


async def test_a_receipt_shows_the_model_what_the_first_call_showed(tmp_path: Path) -> None:
    """A tool returning a model (not text): the receipt holds what the model was shown, so a
    resumed call answered by it shows the same, and the replayed tool turn is vouched for."""
    seen: list[str] = []

    @effect_tool(needs_approval=True)
    def charge_card(amount: int) -> Charge:
        """Charge the customer's card."""
        return Charge(ref="r1", amount=amount)

    def agent(steps: list[Any]) -> Agent[Any]:
        return Agent(name="a", model=ScriptedModel(steps), tools=[charge_card])

    first = await run(agent(steps()), "pay", session_at(tmp_path), streamed=False)
    state_text = first.to_state().to_string()
    for _ in range(2):
        model = ScriptedModel([[assistant_message("done")]])
        resumed = Agent(name="a", model=model, tools=[charge_card])
        state = await RunState.from_string(resumed, state_text)
        for interruption in state.get_interruptions():
            state.approve(interruption)
        await asyncio.create_task(
            run(resumed, state, session_at(tmp_path), streamed=False), context=contextvars.Context()
        )
        outputs = [
            i
            for i in model.calls[0].input
            if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        seen.append(str(outputs[-1]["output"]))
    assert seen[0] == seen[1] == str(Charge(ref="r1", amount=5))


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"idempotent": "false"}, "idempotent"),
        ({"idempotent": 1}, "idempotent"),
        ({"check": "nope"}, "check"),
        ({"needs_approval": "yes"}, "needs_approval"),
        ({"strict_mode": "false"}, "strict_mode"),
        ({"failure_error_function": "quietly"}, "failure_error_function"),
        ({"retries": 3}, "retries"),
    ],
)
def test_a_mistyped_option_is_refused_when_the_tool_is_made(
    options: dict[str, Any], named: str
) -> None:
    """``idempotent="false"`` is not read as true (nor ``check="nope"`` found at the first
    unknown effect): every option of both entry points is checked before any call, and the
    refusal names it."""
    from agents import function_tool

    from agents_reconcile._effects.tool import as_effect_tool
    from agents_reconcile.errors import ConfigurationError

    def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        return "charged"

    with pytest.raises(ConfigurationError, match=named):
        effect_tool(**options)(charge_card)
    with pytest.raises(ConfigurationError, match=named):
        effect_tool(**options)
    mine = {k: v for k, v in options.items() if k in ("check", "idempotent")}
    if mine:
        with pytest.raises(ConfigurationError, match=named):
            as_effect_tool(function_tool(charge_card), **mine)
    with pytest.raises(ConfigurationError, match="FunctionTool"):
        as_effect_tool(charge_card)  # type: ignore[arg-type]


async def test_a_sync_check_settles_an_unknown_effect(tmp_path: Path) -> None:
    """A plain function as ``check`` is asked like an async one (in a worker thread)."""
    payments = Payments()
    payments.fail_after_charge = 1
    asked: list[str] = []

    def find(key: str) -> Any:
        asked.append(key)
        return payments.find(key)

    state_text = await approval_state(tmp_path, payments, check=find)
    await resume(tmp_path, payments, state_text, streamed=False, check=find)
    result = await resume(tmp_path, payments, state_text, streamed=False, check=find)
    assert result.final_output == "done"
    assert len(payments.charges) == 1 and len(asked) == 1, "found by the check, not re-run"


async def test_a_replayed_tool_turn_holding_a_raising_body_s_error_is_vouched_for(
    tmp_path: Path,
) -> None:
    """The body raised (an ordinary tool error, shown to the model as the SDK's error output)
    and the save of that turn was rejected: the next run replays it, the error output being
    vouched for by the failure receipt its effect recorded, instead of denying it."""
    from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

    payments = Payments()
    payments.fail_after_charge = 1
    faulty = FaultInjectingSession(SQLiteSession("user-42", tmp_path / "chat.db"))
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=tmp_path / "journal.db"))
    faulty.plan(Fault.REJECT, at=2)
    with pytest.raises(BackendFailure):
        await run(charging_agent(payments, steps()), "pay", session, streamed=False)
    again = session_at(tmp_path)
    [decision] = await again.reconcile()
    assert decision.action.value == "replayed"
    outputs = [i for i in await again.get_items() if i.get("type") == "function_call_output"]
    assert len(outputs) == 1 and "error occurred" in str(outputs[0]["output"])
    assert len(payments.charges) == 1
    [effect] = await again.journal.effects.of_session("user-42")  # type: ignore[attr-defined]
    assert effect.state is EffectState.STARTED, "the outcome is still unknown"


async def _surrogate_receipt(journal: Any, session: Any) -> None:
    """Run a body returning text with a lone surrogate, then resume its checkpoint twice."""
    counted: list[int] = []
    printed = "charged 5 \ud800 (raw bytes)"

    @effect_tool(needs_approval=True)
    def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        counted.append(amount)
        return printed

    def agent(steps: list[Any]) -> Agent[Any]:
        return Agent(name="a", model=ScriptedModel(steps), tools=[charge_card])

    first = await run(agent(steps()), "pay", session(), streamed=False)
    state_text = first.to_state().to_string()
    for _ in range(2):
        resumed = agent([[assistant_message("done")]])
        state = await RunState.from_string(resumed, state_text)
        for interruption in state.get_interruptions():
            state.approve(interruption)
        result = await asyncio.create_task(
            run(resumed, state, session(), streamed=False), context=contextvars.Context()
        )
        assert result.final_output == "done"
    assert counted == [5], "run once; the receipt answered the second resume"
    [effect] = await journal.effects.of_session("user-42")
    assert (effect.state, effect.output) == (EffectState.DONE, printed)


async def test_a_receipt_holding_a_lone_surrogate_is_kept_exactly(journal: Any) -> None:
    """A body returning text with a lone surrogate (undecodable bytes a tool printed): its
    receipt is written as the batches write such text, so the run goes on, and a resumed
    checkpoint is answered by it without running the body again."""
    directory = Path.cwd()

    def session() -> ReconcilingSession:
        chat = SQLiteSession("user-42", directory / "chat.db")
        return ReconcilingSession(chat, config=ReconcileConfig(journal=journal))

    await _surrogate_receipt(journal, session)


async def test_a_sealed_signed_receipt_holding_a_lone_surrogate_reads_back(
    tmp_path: Path,
) -> None:
    config = ReconcileConfig(
        journal=tmp_path / "journal.db", payload_key=b"p" * 32, signing_key=b"s" * 32
    )

    def session() -> ReconcilingSession:
        return ReconcilingSession(SQLiteSession("user-42", tmp_path / "chat.db"), config=config)

    await _surrogate_receipt(session().journal, session)
