"""An effect tool's own key (``effect_tool(key=...)``) on the real runner, run and streamed:
the model calls a tool whose body charged and then raised, is told to try again and calls
again under a new call id; with the tool's own key (the order id) that second call is the
same effect: its ``check`` finds the charge and nothing is charged twice, or, without a
check, it is refused before the body runs. With the per-call key (no ``key=``) the card is
charged twice, which is why the option exists. A key function that raises or returns no str
is refused before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, SQLiteSession
from agents.exceptions import UserError
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core.effect_records import EffectState, business_effect_key
from agents_reconcile._effects.tool import NOT_FOUND, current_effect, effect_tool
from agents_reconcile.errors import ConfigurationError, EffectUnknown

from ..support.runner_support import run


class Processor:
    """A card processor that dedupes on the idempotency key it is given; the first charge's
    reply is lost once asked to (the charge made, an error raised to the body)."""

    def __init__(self, *, lose_first_reply: bool = True) -> None:
        self.asked: list[str] = []
        self.charged: dict[str, int] = {}
        self.lose_reply = lose_first_reply

    def charge(self, key: str, amount: int) -> str:
        self.asked.append(key)
        self.charged.setdefault(key, amount)
        if self.lose_reply:
            self.lose_reply = False
            raise ConnectionError("the processor's reply was lost after it charged")
        return f"charged {self.charged[key]}"

    async def check(self, key: str) -> Any:
        return f"charged {self.charged[key]}" if key in self.charged else NOT_FOUND


def session_at(tmp_path: Path) -> ReconcilingSession:
    return ReconcilingSession(
        SQLiteSession("user-42", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "journal.db"),
    )


def retrying_agent(processor: Processor, **options: Any) -> tuple[Agent[Any], ScriptedModel]:
    """An agent whose model calls ``pay_order`` for order A-1, is told the call failed, and
    calls it again for the same order under a new call id, then answers."""

    @effect_tool(**options)
    async def pay_order(order_id: str, amount: int) -> str:
        """Charge the customer for an order."""
        return processor.charge(current_effect().key, amount)

    model = ScriptedModel(
        [
            [function_call("pay_order", {"order_id": "A-1", "amount": 5}, call_id="c1")],
            [function_call("pay_order", {"order_id": "A-1", "amount": 5}, call_id="c2")],
            [assistant_message("done")],
        ]
    )
    return Agent(name="shop", model=model, tools=[pay_order]), model


def by_order(arguments: dict[str, Any]) -> str:
    return str(arguments["order_id"])


def outputs(model: ScriptedModel) -> list[str]:
    """The tool outputs the model was shown, in order."""
    last = model.calls[-1].input
    assert isinstance(last, list)
    return [
        str(item["output"])
        for item in last
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_retried_call_under_a_new_call_id_is_the_same_effect_and_charges_once(
    tmp_path: Path, streamed: bool
) -> None:
    """The body charged and raised; the model's retry under a new call id has the same key
    (the order's), so the tool's check finds the charge: one charge, the retry is told it
    was charged, and the effect's receipt is the check's answer."""
    processor = Processor()
    agent, model = retrying_agent(processor, key=by_order, check=processor.check)
    session = session_at(tmp_path)
    result = await run(agent, "pay A-1", session, streamed=streamed)
    assert result.final_output == "done"
    assert processor.asked == [business_effect_key("pay_order", "A-1")], "the body ran once"
    assert len(processor.charged) == 1
    first, second = outputs(model)
    assert "error" in first.lower() and second == "charged 5"
    effects = session.journal.effects
    assert effects is not None
    [effect] = await effects.of_session("user-42")
    assert (effect.state, effect.output, effect.call_id) == (EffectState.DONE, "charged 5", "c1")


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_without_a_check_the_retry_is_refused_before_the_body_runs_again(
    tmp_path: Path, streamed: bool
) -> None:
    """With the order's key and no check, the retry finds an effect started without a
    receipt: refused (``EffectUnknown``) before the body runs; nothing is charged twice."""
    processor = Processor()
    agent, _ = retrying_agent(processor, key=by_order)
    with pytest.raises(EffectUnknown) as refused:
        await run(agent, "pay A-1", session_at(tmp_path), streamed=streamed)
    assert len(processor.asked) == 1
    assert refused.value.decision.evidence["tool"] == "pay_order"


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_with_the_per_call_key_a_retried_call_is_another_effect(
    tmp_path: Path, streamed: bool
) -> None:
    """Without ``key=``, each call id is an effect of its own: the retry runs the body again
    under another key and the processor, deduping on keys, charges twice (the case the
    tool's own key is for; docs/effects.md says when the per-call key is not enough)."""
    processor = Processor()
    agent, _ = retrying_agent(processor, check=processor.check)
    result = await run(agent, "pay A-1", session_at(tmp_path), streamed=streamed)
    assert result.final_output == "done"
    assert len(processor.asked) == 2 and len(processor.charged) == 2


async def test_a_later_call_for_a_paid_order_returns_its_receipt_without_running(
    tmp_path: Path,
) -> None:
    """An order paid in one run is paid: a later run's call for it (another call id, even
    other arguments) is answered from the receipt, the body not run."""
    processor = Processor(lose_first_reply=False)
    agent, _ = retrying_agent(processor, key=by_order)
    await run(agent, "pay A-1", session_at(tmp_path), streamed=False)
    assert len(processor.asked) == 1, "c2, the same order, answered from c1's receipt"

    @effect_tool(key=by_order)
    async def pay_order(order_id: str, amount: int) -> str:
        """Charge the customer for an order."""
        return processor.charge(current_effect().key, amount)

    model = ScriptedModel(
        [
            [function_call("pay_order", {"order_id": "A-1", "amount": 7}, call_id="c9")],
            [assistant_message("again")],
        ]
    )
    again = Agent(name="shop", model=model, tools=[pay_order])
    await run(again, "pay A-1 once more", session_at(tmp_path), streamed=True)
    assert len(processor.asked) == 1, "the receipt answered"
    assert outputs(model) == ["charged 5"] * 3, "c1 and c2 earlier, c9 from the receipt"


async def test_two_tools_with_the_same_key_are_two_effects(tmp_path: Path) -> None:
    """The tool's name is part of the effect's key: a refund for order A-1 is not its charge."""
    ran: list[str] = []

    @effect_tool(key=by_order)
    async def pay_order(order_id: str) -> str:
        """Charge an order."""
        ran.append(f"pay {current_effect().key}")
        return "paid"

    @effect_tool(key=by_order)
    async def refund_order(order_id: str) -> str:
        """Refund an order."""
        ran.append(f"refund {current_effect().key}")
        return "refunded"

    model = ScriptedModel(
        [
            [function_call("pay_order", {"order_id": "A-1"}, call_id="c1")],
            [function_call("refund_order", {"order_id": "A-1"}, call_id="c2")],
            [assistant_message("done")],
        ]
    )
    agent = Agent(name="shop", model=model, tools=[pay_order, refund_order])
    await run(agent, "pay and refund", session_at(tmp_path), streamed=False)
    assert ran == [
        f"pay {business_effect_key('pay_order', 'A-1')}",
        f"refund {business_effect_key('refund_order', 'A-1')}",
    ]


@pytest.mark.parametrize(
    ("key", "said"),
    [
        (lambda arguments: arguments["order"], "raised KeyError"),
        (lambda arguments: 42, "returned int"),
        (lambda arguments: "", "returned an empty str"),
    ],
    ids=["raises", "not_a_str", "empty"],
)
async def test_a_key_function_that_fails_is_refused_before_anything_is_written(
    tmp_path: Path, key: Any, said: str
) -> None:
    """A key function that raises or returns anything but a non-empty str stops the run with
    a ``ConfigurationError`` (the SDK's ``UserError`` carries it) naming the tool and what
    went wrong, its value left out; the body never ran and the journal holds no effect."""
    processor = Processor(lose_first_reply=False)
    agent, _ = retrying_agent(processor, key=key)
    session = session_at(tmp_path)
    with pytest.raises(UserError) as raised:
        await run(agent, "pay A-1", session, streamed=False)
    cause = raised.value.__cause__
    assert isinstance(cause, ConfigurationError)
    assert "effect tool 'pay_order': its key function" in str(cause) and said in str(cause)
    assert "A-1" not in str(cause)
    assert processor.asked == []
    effects = session.journal.effects
    assert effects is not None
    assert await effects.of_session("user-42") == []


async def _async_key(arguments: dict[str, Any]) -> str:
    return "A-1"


@pytest.mark.parametrize("key", ["order_id", _async_key], ids=["not_callable", "async"])
def test_a_key_that_is_not_a_plain_callable_is_refused_when_the_tool_is_made(key: Any) -> None:
    """``key=`` must be a plain callable: a string, or an async function (it is asked before
    anything is written, with nothing to wait on), is refused when the tool is made."""
    with pytest.raises(ConfigurationError, match="key must be None or a plain"):

        @effect_tool(key=key)
        async def pay_order(order_id: str) -> str:
            """Charge an order."""
            return "paid"
