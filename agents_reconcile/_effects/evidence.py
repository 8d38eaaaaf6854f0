"""Evidence before continuation: a batch about to be accepted as written, or replayed, that
holds the output of an effect tool's call must hold what that effect's receipt says. The rule
is pure (``effect_problems``: given the batch and the session's effects, what is wrong,
payload-free); ``vouched_by_receipts`` applies it to a verdict, reading the effects."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from .._core.effect_records import Effect, EffectState
from .._core.fingerprint import item_digest
from .._core.records import Outcome, Reason

if TYPE_CHECKING:
    from .._core.classify import Verdict
    from .._core.records import PendingWrite
    from .._session.journal_client import JournalClient

__all__ = ["OUTPUT_TYPE", "effect_problems", "outputs_by_call", "vouched_by_receipts"]

OUTPUT_TYPE: Final = "function_call_output"
"""The output items of function tools, the only tools that can be effect tools."""


def outputs_by_call(batch: Sequence[Any]) -> dict[str, Any]:
    """The function tool outputs a batch holds, by call id."""
    found: dict[str, Any] = {}
    for item in batch:
        if isinstance(item, Mapping) and item.get("type") == OUTPUT_TYPE:
            call_id = item.get("call_id")
            if isinstance(call_id, str):
                found[call_id] = item.get("output")
    return found


def effect_problems(batch: Sequence[Any], effects: Iterable[Effect]) -> dict[str, Any] | None:
    """None when every effect tool output in ``batch`` matches its effect's receipt; else the
    evidence of the first that does not: an output recovered for an effect that left no
    receipt (the output came from somewhere the receipt cannot vouch for), or an output other
    than the one the receipt holds. An error output a raising body showed the model is
    vouched for by the digest its effect recorded of it (``Effect.error_digests``). Outputs
    of calls that are not effects are not judged."""
    outputs = outputs_by_call(batch)
    if not outputs:
        return None
    for effect in effects:
        if effect.call_id not in outputs:
            continue
        given = outputs[effect.call_id]
        evidence = {
            "effect": effect.key,
            "tool": effect.tool,
            "call_id": effect.call_id,
            "output_digest": item_digest({"output": given}),
        }
        if evidence["output_digest"] in effect.error_digests:
            continue  # the error a raising body showed the model: its failure receipt
        if effect.state is not EffectState.DONE:
            return {**evidence, "problem": "no receipt for this effect's output"}
        if not _same_output(given, effect.output):
            return {
                **evidence,
                "receipt_digest": effect.output_digest,
                "problem": "the output is not the one the receipt holds",
            }
    return None


def _same_output(given: Any, recorded: Any) -> bool:
    """Whether an output item's ``output`` is what the SDK makes of the recorded output."""
    if given == recorded:
        return True
    return bool(given == _as_model_output(recorded))


def _as_model_output(output: Any) -> Any:
    try:  # The SDK's own conversion of a tool's return value (a private helper: optional).
        from agents.items import ItemHelpers

        return ItemHelpers._convert_tool_output(output)
    except (ImportError, AttributeError):  # pragma: no cover - an SDK without it
        return str(output)


async def vouched_by_receipts(
    client: JournalClient, intent: PendingWrite, verdict: Verdict
) -> Verdict:
    """``verdict``, unless it would accept or replay a batch holding an effect tool's output
    that the effect's receipt does not hold: then nobody can vouch for it (ambiguous,
    ``effect_unvouched``, with the evidence)."""
    from .._core.classify import Verdict

    if verdict.outcome is Outcome.AMBIGUOUS or not outputs_by_call(intent.batch):
        return verdict
    effects = client.journal.effects
    if effects is None:
        return verdict
    problem = effect_problems(
        intent.batch, await client.call(effects.of_session, intent.session_id)
    )
    if problem is None:
        return verdict
    evidence = {**verdict.evidence, "judged": verdict.outcome.value, **problem}
    return Verdict(Outcome.AMBIGUOUS, Reason.EFFECT_UNVOUCHED, evidence)
