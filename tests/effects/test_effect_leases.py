"""An effect owner's lease is judged on the journal's clock, never on the clock of the worker
that wrote the record, on every registered journal: a worker elsewhere whose clock is far
behind keeps its live effect (nobody takes it over), and one whose clock is far ahead loses
an effect whose lease ran out (the next call takes it over)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core.effect_records import Effect, EffectState, arguments_digest, effect_key
from agents_reconcile._effects.resolve_effect import held
from agents_reconcile._effects.tool import NOT_FOUND, current_effect, effect_tool
from agents_reconcile.errors import EffectUnknown

from ..support.journal_support import STRANGER

SKEW = 10 * 86_400.0
"""How far the other worker's clock is off: ten days."""
LEASE = 30.0
ARGUMENTS = '{"amount":5}'
KEY = effect_key("user-42", "c1", "charge_card", ARGUMENTS)


def begun_elsewhere(started_at: float, owner: str = str(STRANGER)) -> Effect:
    """``charge_card``'s effect for call c1, begun by a worker on another host whose clock
    read ``started_at`` (no receipt)."""
    return Effect(
        KEY, "user-42", "charge_card", "c1", arguments_digest(ARGUMENTS), owner, started_at
    )


async def pay(journal: Any, tmp_path: Path, charges: list[str]) -> Any:
    """A fresh run whose model calls ``charge_card`` as call c1 (the key begun elsewhere);
    the tool's ``check`` finds nothing at the processor."""

    async def nothing(key: str) -> Any:
        return NOT_FOUND

    @effect_tool(check=nothing)
    def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        charges.append(current_effect().key)
        return f"charged {amount}"

    steps = [
        [function_call("charge_card", {"amount": 5}, call_id="c1")],
        [assistant_message("done")],
    ]
    agent = Agent(name="a", model=ScriptedModel(steps), tools=[charge_card])
    session = ReconcilingSession(
        SQLiteSession("user-42", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=journal, lease_seconds=LEASE),
    )
    return await Runner.run(agent, "pay", session=session, run_config=session.run_config())


async def test_a_record_carries_its_age_by_the_journal_s_clock(journal: Any) -> None:
    """A record read back says how long ago the journal stamped it, whatever time its writer's
    clock put in it, and a takeover starts that age again."""
    behind = begun_elsewhere(time.time() - SKEW)
    _, recorded = await journal.effects.begin(behind)
    assert recorded
    await asyncio.sleep(0.05)
    read = await journal.effects.get(KEY)
    assert read.age is not None and 0.04 <= read.age < 5.0, read.age
    assert 0.04 <= read.held_for(time.time()) < 5.0
    [listed] = await journal.effects.started("user-42")
    assert listed.age is not None and 0.04 <= listed.age < 5.0
    taken = Effect(**{**read.__dict__, "owner": "worker/2/2", "age": None})
    assert await journal.effects.restart(taken, expect_owner=read.owner)
    again = await journal.effects.get(KEY)
    assert again.age is not None and again.age < read.age


@pytest.mark.parametrize("skew", [-SKEW, SKEW], ids=["clock-behind", "clock-ahead"])
async def test_a_live_owner_s_effect_is_not_taken_over_whatever_its_clock(
    journal: Any, tmp_path: Path, skew: float
) -> None:
    """A worker on another host began the effect a moment ago by the journal's clock (its own
    clock ten days off): within its lease, so the call is refused before the body or the
    check runs, and the record stays the worker's."""
    await journal.effects.begin(begun_elsewhere(time.time() + skew))
    stored = await journal.effects.get(KEY)
    assert held(stored, LEASE), "an operator's view: a live owner runs it"
    charges: list[str] = []
    with pytest.raises(EffectUnknown) as refused:
        await pay(journal, tmp_path, charges)
    assert charges == [], "never run beside a live owner"
    assert refused.value.decision.evidence["problem"] == "its body is running under a live owner"
    after = await journal.effects.get(KEY)
    assert (after.state, after.owner, after.attempts) == (EffectState.STARTED, str(STRANGER), 1)


@pytest.mark.parametrize("skew", [-SKEW, SKEW], ids=["clock-behind", "clock-ahead"])
async def test_an_owner_whose_lease_ran_out_loses_its_effect_whatever_its_clock(
    journal: Any, tmp_path: Path, skew: float
) -> None:
    """A worker on another host began the effect under a lease of 50 ms (stamped with its
    owner) that ran out by the journal's clock, its own clock ten days off: the next call
    takes the effect over, asks the check (nothing there) and runs the body once."""
    lease = 0.05
    await journal.effects.begin(
        begun_elsewhere(time.time() + skew, owner=str(STRANGER.leased(lease)))
    )
    await asyncio.sleep(4 * lease)
    assert not held(await journal.effects.get(KEY), LEASE), "an operator's view: its owner is gone"
    charges: list[str] = []
    result = await pay(journal, tmp_path, charges)
    assert result.final_output == "done"
    assert charges == [KEY], "taken over and run once, under the same key"
    done = await journal.effects.get(KEY)
    assert (done.state, done.attempts) == (EffectState.DONE, 2)
