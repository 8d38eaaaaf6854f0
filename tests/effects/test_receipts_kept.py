"""Pruning keeps the receipts a write still pending needs, on every registered journal: the
check of a pending tool turn's effect output against its receipt, made before the turn is
accepted or replayed, still finds the receipt however old it is, so an output the receipt does
not hold is denied rather than replayed for want of the receipt."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession

from agents_reconcile import ContinuationDenied, ReconcileConfig, ReconcilingSession, Retention
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._core.effect_records import Effect, EffectState, arguments_digest, effect_key
from agents_reconcile._core.fingerprint import digest_items
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.records import PendingWrite

ARGUMENTS = '{"amount":5}'
RECEIPTS_NOW = Retention(decisions=None, receipts=0, idle_sessions=None)
"""A prune that lets every receipt go that no guarantee needs."""


async def pending_tool_turn(session: ReconcilingSession, journal: Any, shown: str) -> Effect:
    """The effect of call c1 done with its receipt ("charged 6"), and a pending write (its
    append failed) of the tool turn whose output says ``shown``."""
    await session.add_items([{"role": "user", "content": "pay"}])
    history = await session.get_items()
    key = effect_key("user-42", "c1", "charge_card", ARGUMENTS)
    effect = Effect(key, "user-42", "charge_card", "c1", arguments_digest(ARGUMENTS), "x/1/1", 1.0)
    await journal.effects.begin(effect)
    done: Effect = await journal.effects.finish(effect.with_receipt("charged 6", at=2.0))
    call = {"type": "function_call", "call_id": "c1", "name": "charge_card", "arguments": ARGUMENTS}
    batch = (call, {"type": "function_call_output", "call_id": "c1", "output": shown})
    intent = PendingWrite(
        intent_id="tool-turn",
        session_id="user-42",
        backend=session.backend_identity,
        batch=batch,
        batch_digests=digest_items(batch),
        before_digests=digest_items(history),
        before_is_whole=True,
        created_at=3.0,
    )
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    return done


async def test_a_pending_output_its_receipt_does_not_hold_is_denied_after_a_prune(
    journal: Any, tmp_path: Path
) -> None:
    """The receipt (older than the retention) stays while the tool turn is pending: the turn,
    whose output the receipt does not hold, is denied ``effect_unvouched``, not replayed."""
    session = ReconcilingSession(
        SQLiteSession("user-42", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
    )
    done = await pending_tool_turn(session, journal, shown="charged 5")
    await asyncio.sleep(0.05)
    pruned = await journal.retention.prune(RECEIPTS_NOW)
    assert pruned.receipts == 0, "the receipt a pending write needs was pruned"
    kept = await journal.effects.get(done.key)
    assert kept is not None and kept.state is EffectState.DONE
    with pytest.raises(ContinuationDenied) as denied:
        await session.reconcile()
    assert denied.value.decision.reason.value == "effect_unvouched"
    stored = await SQLiteSession("user-42", tmp_path / "chat.db").get_items()
    assert len(stored) == 1, "nothing replayed"


async def test_a_receipt_goes_once_the_write_it_vouches_for_is_resolved(
    journal: Any, tmp_path: Path
) -> None:
    """A pending turn whose output the receipt holds is replayed after the prune (its receipt
    kept vouches for it); once settled, the old receipt is pruned as any other."""
    session = ReconcilingSession(
        SQLiteSession("user-42", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
    )
    done = await pending_tool_turn(session, journal, shown="charged 6")
    await asyncio.sleep(0.05)
    assert (await journal.retention.prune(RECEIPTS_NOW)).receipts == 0
    [decision] = await session.reconcile()
    assert decision.action.value == "replayed"
    assert len(await session.get_items()) == 3
    assert (await journal.retention.prune(RECEIPTS_NOW)).receipts == 1
    assert await journal.effects.get(done.key) is None
