"""An operator's resolution of a tool effect checks every argument before it writes anything,
on every registered journal: a bad key, outcome, reason, actor, output or lease is refused with
``ResolutionRefused`` and the effect stays as it was (started, under its owner, no decision),
whether it comes through ``resolve_effect`` or the session's ``resolve_effect``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core.effect_records import EffectState
from agents_reconcile._core.records import BackendIdentity
from agents_reconcile._effects.resolve_effect import resolve_effect
from agents_reconcile._session.journal_client import JournalClient
from agents_reconcile.errors import ResolutionRefused

from ..support.journal_support import STRANGER, make_effect

BAD_ARGUMENTS = [
    pytest.param({"actor": 1234}, "actor", id="actor-int"),
    pytest.param({"actor": b"ops"}, "actor", id="actor-bytes"),
    pytest.param({"outcome": "replay"}, "not an effect resolution", id="outcome-unknown"),
    pytest.param({"outcome": None}, "not an effect resolution", id="outcome-none"),
    pytest.param({"reason": "   "}, "reason", id="reason-blank"),
    pytest.param({"reason": 7}, "reason", id="reason-int"),
    pytest.param({"outcome": "committed", "output": None}, "output", id="committed-no-output"),
    pytest.param({"outcome": "retry", "output": "charged 5"}, "output", id="output-with-retry"),
    pytest.param({"lease_seconds": "30"}, "lease_seconds", id="lease-text"),
    pytest.param({"lease_seconds": float("nan")}, "lease_seconds", id="lease-nan"),
]


GONE_LEASE = 0.001
"""The lease the gone owner stamped: run out, by the journal's clock, a moment after begun."""


def gone_effect() -> Any:
    """A started effect whose owner (elsewhere, its lease run out) left no receipt."""
    return make_effect("c1", session_id="user-42", owner=str(STRANGER.leased(GONE_LEASE)))


async def assert_untouched(journal: Any, effect: Any) -> None:
    assert await journal.effects.get(effect.key) == effect
    assert (await journal.effects.get(effect.key)).state is EffectState.STARTED
    assert await journal.decisions(intent_id=effect.key) == []


@pytest.mark.parametrize(("bad", "named"), BAD_ARGUMENTS)
async def test_a_bad_argument_is_refused_before_anything_is_written(
    journal: Any, bad: dict[str, Any], named: str
) -> None:
    effect = gone_effect()
    await journal.effects.begin(effect)
    client = JournalClient(
        "user-42", BackendIdentity("tests.effects", ""), ReconcileConfig(journal=journal)
    )
    arguments: dict[str, Any] = {
        "outcome": "abandon",
        "reason": "checked the processor",
        "actor": "ops:ana",
        "output": None,
        "lease_seconds": 30.0,
    }
    arguments.update(bad)
    outcome = arguments.pop("outcome")
    with pytest.raises(ResolutionRefused, match=named) as refused:
        await resolve_effect(client, journal, effect.key, outcome, **arguments)
    assert refused.value.intent_id == effect.key
    await assert_untouched(journal, effect)


@pytest.mark.parametrize("key", [1234, "", None], ids=["int", "empty", "none"])
async def test_a_key_that_is_no_key_is_refused(journal: Any, key: Any) -> None:
    effect = gone_effect()
    await journal.effects.begin(effect)
    client = JournalClient(
        "user-42", BackendIdentity("tests.effects", ""), ReconcileConfig(journal=journal)
    )
    with pytest.raises(ResolutionRefused, match="effect key"):
        await resolve_effect(client, journal, key, "abandon", reason="r", lease_seconds=30.0)
    await assert_untouched(journal, effect)


async def test_the_sessions_resolve_effect_refuses_a_bad_actor_and_writes_nothing(
    journal: Any, tmp_path: Path
) -> None:
    """The regression of issue 23 (4b): ``actor=1234`` released the effect, then raised
    ``AttributeError`` with no decision. Refused now before the effect is taken; a good
    call afterwards resolves it."""
    effect = gone_effect()
    await journal.effects.begin(effect)
    await asyncio.sleep(20 * GONE_LEASE)  # its lease runs out
    session = ReconcilingSession(
        SQLiteSession("user-42", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
    )
    with pytest.raises(ResolutionRefused, match="actor"):
        await session.resolve_effect(effect.key, "abandon", reason="checked", actor=1234)  # type: ignore[arg-type]
    await assert_untouched(journal, effect)
    decision = await session.resolve_effect(effect.key, "abandon", reason="checked", actor="ops")
    assert decision.evidence["actor"] == "ops"
    done = await journal.effects.get(effect.key)
    assert done.state is EffectState.DONE and "abandoned" in done.output
