"""What a decision says to people: why each reason came out as it did, and its evidence on
one line.

The sentences are keyed by the value of each ``records.Reason`` (its stored form), which reads
them as ``Reason.explanation``; operators see them in ``show``, in errors and in logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["EXPLANATIONS", "evidence_text"]

EXPLANATIONS: Final[Mapping[str, str]] = {
    "batch_present": "The history ends with the batch on top of what preceded it: "
    "the write landed and is never replayed.",
    "batch_absent": "The history is exactly as it was before the write: the batch is missing.",
    "indistinguishable": "Repeated content makes the history look both written and "
    "unwritten; neither replaying nor skipping can be vouched for.",
    "history_changed": "The history no longer ends with what preceded the write, with or "
    "without the batch: someone else changed it.",
    "partial_commit": "Only the first items of the batch are in the history.",
    "chunks_landed": "The batch's first requests are in the history, whole, and nothing after "
    "them: the rest of the batch is missing and is appended once, in order.",
    "write_refused": "The store refused the write outright: its answer proves that the "
    "refused request stored nothing and that sending it again would be refused the same way. "
    "The requests before it (see landed) stay in the history; the refused request and any "
    "after it (see dropped) are never sent, and the session goes on without them. A run "
    "whose state still carries the write (a RunState saved before) is refused: start a new "
    "run on the session.",
    "operator_required": "The batch is missing and on_unchanged='fail' leaves replaying "
    "it to an operator.",
    "in_flight_elsewhere": "Another live worker owns this write and it is still in flight.",
    "lease_expired": "A worker on another host holds this write in flight and its lease "
    "ran out, but the store cannot refuse that worker's late write (it has no compare-and-swap "
    "to fence it with): taking over could store the batch twice. It waits for that worker to "
    "finish, or for an operator who knows it is gone (agents-reconcile resolve).",
    "session_busy": "Another task of this process kept the session busy past the wait "
    "bound (in_flight_wait).",
    "backend_mismatch": "The intent was recorded for another backend.",
    "unsupported_record": "The intent was recorded by another format version or "
    "fingerprint scheme and is never compared.",
    "record_untrusted": "The intent's record is damaged or was edited; its digest does not match.",
    "copies_disagree": "The journal and the RunState hold different contents for one intent.",
    "write_found": "The store's record of writes holds this write's id: it landed and is "
    "never replayed.",
    "write_absent": "The store's head revision is the one the write expected and the write's "
    "id is not recorded: it did not land.",
    "extended_by_others": "The write did not land, and the head moved through writes other "
    "writers recorded: the history was legitimately extended (policy on_extended decides).",
    "write_record_broken": "The store's record of writes is inconsistent (revisions missing, "
    "going back, or the write found out of place): nobody can vouch for the history.",
    "state_unsigned": "What the run's state carries is unsigned, or its signature does not "
    "verify under this deployment's signing key: whoever held the RunState may have edited it. "
    "It is refused, and nothing of it is written to the journal.",
    "state_too_large": "The run's state carries more intent copies than one state ever "
    "holds: it is refused unread.",
    "runstate_expired": "The run resumes a RunState older than the journal's retention keeps "
    "what it would be checked against (its intents' decisions, its tool calls' receipts, its "
    "session's write count): it cannot be vouched for, so it is refused (see its age and the "
    "retention in the evidence). Start a new run on the session, or keep states for less than "
    "the retention.",
    "run_finished": "The run's state ended at its final output, and that output's save "
    "raised: the write is settled now (its batch stored once), so the run is complete. Going "
    "on would ask the model again and store a second answer: start a new run on the session.",
    "operator_resolved": "An operator resolved the intent (see the resolution, actor and "
    "reason in the evidence, next to what the rule judged at that moment).",
    "abandoned": "An operator abandoned this write (see the resolution, actor and reason "
    "in the evidence): a run that still carries it (a RunState from before the resolution, or "
    "the SDK's own record of the pending write) would continue from a batch the history does "
    "not hold. It is refused and the batch is never appended; start a new run on the session.",
    "history_repaired": "An operator replaced the history with a repaired one, removing "
    "only the damage the check proved (see the removed positions and digests in the "
    "evidence), under a write-ahead intent of its own.",
    "effect_unknown": "An effect tool's earlier call under the same idempotency key "
    "started its effect and left no receipt: whether the effect happened is unknown, so the "
    "body is not run again (give the tool a check, or resolve the effect).",
    "effect_unvouched": "The batch holds an effect tool's output that the effect's "
    "receipt does not vouch for (no receipt, or another output): accepting or replaying it "
    "would continue from an effect nobody can vouch for.",
    "stale_state": "The session was written after this run last saw it (a RunState "
    "checkpoint older than the history, or another writer): continuing would write on a "
    "history the run has not seen, repeating what is already there (an approved tool would run "
    "again). Resume the newest state: after a resume that raised, the state the failed run "
    "left (the RunState object given to Runner.run, which the SDK advances in place, or the "
    "streamed result's to_state()), not the checkpoint it started from. Or start a new run on "
    "the session.",
}
"""Why a decision came out as it did, for each ``Reason`` by its value: a sentence for people."""


def evidence_text(evidence: Mapping[str, Any]) -> str:
    """Payload-free evidence on one line, digests shortened for people."""
    parts = []
    for key, value in evidence.items():
        if isinstance(value, list | tuple):
            shown = "[" + ", ".join(_short(v) for v in value) + "]"
        else:
            shown = _short(value)
        parts.append(f"{key}={shown}")
    return "; ".join(parts) or "none"


def _short(value: Any) -> str:
    text = str(value)
    return text[:12] if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text
