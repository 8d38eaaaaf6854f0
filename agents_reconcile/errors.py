"""The exceptions agents-reconcile raises, as one tree.

::

    ReconcileError                     base of everything raised here
    ├── ConfigurationError             fix the code or the configuration (also a ValueError)
    │   ├── UnsupportedSession         this session cannot be reconciled honestly
    │   └── UnsupportedSDK             the installed openai-agents is outside the supported range
    ├── FingerprintError               an item cannot be serialised; nothing was written
    ├── RecordError                    a stored or carried record cannot be trusted
    │   ├── RecordTampered             its digest (or its seal) does not match its content
    │   │   └── SignatureInvalid       its signature does not verify under the key it names
    │   ├── RecordUnsigned             unsigned (or under an unknown key) where records are signed
    │   ├── PayloadKeyUnknown          its batch is sealed under a key this process lacks
    │   ├── UnsupportedRecordVersion   written by a newer (or unknown) format version
    │   └── RecordMalformed            not a record at all (truncated, wrong shape)
    ├── RevisionConflict               a revisioned append found another head (nothing written)
    ├── WriteRefused                   the store refused a write outright: recorded, not resent
    ├── ResolutionRefused              an operator's resolution was refused (nothing written)
    ├── SchemaMismatch                 a store's schema is missing (migrate) or newer (upgrade)
    ├── JournalError                   the intent journal could not be used
    │   ├── JournalUnavailable         unreachable, locked or read-only: retry later
    │   ├── JournalCorrupt             the journal's storage is damaged: call an operator
    │   └── IntentConflict             one intent id, two different contents
    │       └── LeaseLost              a claim was lost: another worker holds the intent now
    └── ContinuationDenied             the run may not go on (also the SDK's ``UserError``)
        ├── BindingMismatch            the intent belongs to another backend, scheme or version
        ├── RunStateExpired            the RunState is older than the journal's retention
        ├── RunFinished                the RunState ended at its final output: start a new run
        └── EffectUnknown              an effect started and left no receipt: not run again

``ContinuationDenied`` subclasses the SDK's ``UserError`` (an ``AgentsException``), so code
that handles the SDK's own refusal keeps working, and the SDK attaches ``run_data`` to it
when it escapes a run. Both denials are defined, and the SDK loaded, when one of them is first
used; the rest of this module needs nothing from the SDK. A failed ``add_items`` is *not*
translated: the backend's own exception reaches the caller, with a note naming the pending
intent. The one exception to that is ``WriteRefused``: an answer that proves nothing of a
write was stored and that sending it again would be refused the same way (an OpenAI
conversation's HTTP 400, say) is a known outcome, recorded as a decision and raised as such
(the service's own exception is its ``__cause__``, except where payloads are sealed).
"""

from __future__ import annotations

import shlex
import threading
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from agents.exceptions import UserError

    from ._core.records import Decision

__all__ = [
    "BindingMismatch",
    "ConfigurationError",
    "ContinuationDenied",
    "EffectUnknown",
    "FingerprintError",
    "IntentConflict",
    "JournalCorrupt",
    "JournalError",
    "JournalUnavailable",
    "LeaseLost",
    "PayloadKeyUnknown",
    "ReconcileError",
    "RecordError",
    "RecordMalformed",
    "RecordTampered",
    "RecordUnsigned",
    "ResolutionRefused",
    "RevisionConflict",
    "RunFinished",
    "RunStateExpired",
    "SchemaMismatch",
    "SignatureInvalid",
    "UnsupportedRecordVersion",
    "UnsupportedSDK",
    "UnsupportedSession",
    "WriteRefused",
]


class ReconcileError(Exception):
    """Base class of every exception this package raises."""


class ConfigurationError(ReconcileError, ValueError):
    """The wrapper or its configuration is invalid; nothing was read or written."""


class UnsupportedSession(ConfigurationError, TypeError):
    """The inner session cannot be reconciled honestly (for example, it writes in chunks)."""


class UnsupportedSDK(ConfigurationError, ImportError):
    """The installed ``openai-agents`` is outside the range this release supports (raised when
    the package is imported, before anything is read or written)."""


class FingerprintError(ReconcileError, TypeError):
    """An item cannot be serialised canonically; the batch was not written.

    ``index`` is the item's position in the batch.
    """

    def __init__(self, message: str, *, index: int) -> None:
        super().__init__(message)
        self.index = index


class RecordError(ReconcileError):
    """A record (from the journal or a RunState) cannot be trusted as written.

    ``intent_id`` names the intent whose record it is, when the journal row said so.
    """

    intent_id: str | None = None


class RecordTampered(RecordError):
    """The record's content does not match the digest stored with it."""


class RecordUnsigned(RecordError):
    """The record carries no signature this deployment can verify (none, or one under a key
    it does not hold: ``key_id`` names that key, empty when there is no signature), and this
    deployment signs: it came from outside, and is not trusted."""

    def __init__(self, message: str, *, key_id: str = "") -> None:
        super().__init__(message)
        self.key_id = key_id


class SignatureInvalid(RecordTampered):
    """The record's signature does not verify: it was edited, or moved from another record."""


class PayloadKeyUnknown(RecordError):
    """The record's batch is sealed under a key this process does not hold (``key_id``
    names it). Nothing is guessed and nothing is dropped: configure the key and try again."""

    def __init__(self, message: str, *, key_id: str = "") -> None:
        super().__init__(message)
        self.key_id = key_id


class UnsupportedRecordVersion(RecordError):
    """The record uses a format version or fingerprint scheme this release does not read."""


class RecordMalformed(RecordError):
    """The bytes are not a record: truncated, wrong type, or missing fields."""


class RevisionConflict(ReconcileError):
    """A revisioned store refused an append: the session's head was not the expected one.

    Nothing was written; ``actual`` is the head the store holds now.
    """

    def __init__(self, message: str, *, expected: int, actual: int) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class WriteRefused(ReconcileError):
    """The store refused a write outright: its answer (``status``: an HTTP 400, 404, 410, 413,
    415 or 422 from an OpenAI conversation) proves that the refused request stored nothing and
    that sending it again would be refused the same way. That is a known outcome, not an
    uncertain one: the intent is settled with a decision (reason ``write_refused``, action
    ``dropped``) and nothing of the batch is sent again, so the session goes on without it, as
    the bare session does.

    ``refused`` is the positions in the batch of the refused request's items, ``item`` the one
    the service's answer names (None when it names none); the ``landed`` items before them
    (earlier requests of the same batch, stored whole) stay in the history, and the
    ``dropped`` ones (the refused request and any after it) were not stored and are never
    sent. ``status``, ``code`` and ``param`` are the service's answer; ``service_message`` is
    its message, None where payloads are sealed (a message may quote an item). ``decision``
    is the recorded decision; ``intent_id`` and ``session_id`` name it.
    """

    def __init__(
        self,
        message: str,
        *,
        decision: Decision,
        status: int,
        code: str | None,
        param: str | None,
        service_message: str | None,
        refused: range,
        item: int | None,
        landed: int,
        dropped: int,
    ) -> None:
        super().__init__(message)
        self.decision = decision
        self.intent_id = decision.intent_id
        self.session_id = decision.session_id
        self.status = status
        self.code = code
        self.param = param
        self.service_message = service_message
        self.refused = refused
        self.item = item
        self.landed = landed
        self.dropped = dropped


class ResolutionRefused(ReconcileError):
    """An operator's resolution of an intent was refused: nothing was appended, no decision
    recorded, and the intent stays pending. It is unknown, settled already, held by a live
    owner, its session was busy, or the rule's evidence forbids the resolution asked for
    (``evidence`` says what was seen, payload-free)."""

    def __init__(
        self, message: str, *, intent_id: str, evidence: dict[str, object] | None = None
    ) -> None:
        super().__init__(message)
        self.intent_id = intent_id
        self.evidence = dict(evidence or {})


class SchemaMismatch(ReconcileError):
    """A revisioned store's schema is missing (run ``agents-reconcile migrate``) or newer than
    this release knows (upgrade); nothing was read or written."""


class JournalError(ReconcileError):
    """The intent journal could not be used."""


class JournalUnavailable(JournalError):
    """The journal is unreachable, locked, or read-only; the operation may succeed later."""


class JournalCorrupt(JournalError):
    """The journal's storage is damaged or is not a journal; an operator must look at it."""


class IntentConflict(JournalError):
    """An intent id is already recorded with different content."""

    def __init__(self, message: str, *, intent_id: str) -> None:
        super().__init__(message)
        self.intent_id = intent_id


class LeaseLost(IntentConflict):
    """A journal write made under a claim was refused: the intent is no longer this worker's
    (its lease ran out and another worker claimed it, with a newer fencing token, or settled
    it). Nothing was written; the new holder finishes what this worker started."""


# The two denials subclass the SDK's ``UserError``, and loading the SDK takes seconds: they are
# defined when first asked for (PEP 562), so the journal, the records and the command line
# can be used without it. The declarations below are what type checkers see.
if TYPE_CHECKING:

    class ContinuationDenied(ReconcileError, UserError):
        decision: Decision
        intent_id: str
        session_id: str

        def __init__(self, decision: Decision) -> None: ...

    class BindingMismatch(ContinuationDenied): ...

    class RunStateExpired(ContinuationDenied): ...

    class RunFinished(ContinuationDenied): ...

    class EffectUnknown(ContinuationDenied): ...


_DENIALS: Final = frozenset(
    {"ContinuationDenied", "BindingMismatch", "RunStateExpired", "RunFinished", "EffectUnknown"}
)
_defining = threading.Lock()


def _define_denials() -> dict[str, type[ReconcileError]]:
    from agents.exceptions import UserError

    class ContinuationDenied(ReconcileError, UserError):
        """The run may not continue: a pending write could not be vouched for.

        ``decision`` holds the outcome, the reason and the payload-free evidence; ``intent_id``
        and ``session_id`` name what an operator has to look at. Raised before any model call,
        with the stored history untouched.
        """

        def __init__(self, decision: Decision) -> None:
            self.decision = decision
            self.intent_id = decision.intent_id
            self.session_id = decision.session_id
            super().__init__(_describe(decision))

    class BindingMismatch(ContinuationDenied):
        """The intent belongs to another backend, session, scheme or version, or its copies
        disagree."""

    class RunStateExpired(ContinuationDenied):
        """The run resumes a RunState older than the journal's retention keeps what it would
        be checked against (its intents' decisions, its tool calls' receipts, its session's
        write count): refused, never taken for current. The decision's reason is
        ``runstate_expired``; its evidence gives the state's age and the retention. Nothing
        was written."""

    class RunFinished(ContinuationDenied):
        """The run resumes a RunState that ended at its final output, whose save raised: that
        output is settled now (stored once, replayed if it was missing), and going on would
        ask the model again and store a second answer. The decision's reason is
        ``run_finished``; ``intent_id`` names the final output's write. Nothing else was
        written: start a new run on the session."""

    class EffectUnknown(ContinuationDenied):
        """An effect tool's call is refused before its body runs: an earlier call under the
        same idempotency key started the effect and left no receipt (the outcome is unknown),
        and the tool has no ``check`` and is not idempotent. ``intent_id`` is the effect's
        key; the decision's evidence names the tool, the call and the earlier owner."""

    defined: dict[str, type[ReconcileError]] = {
        "ContinuationDenied": ContinuationDenied,
        "BindingMismatch": BindingMismatch,
        "RunStateExpired": RunStateExpired,
        "RunFinished": RunFinished,
        "EffectUnknown": EffectUnknown,
    }
    for name, cls in defined.items():
        cls.__qualname__ = name  # found by name in this module, as any other class here
    return defined


def __getattr__(name: str) -> type[ReconcileError]:
    if name not in _DENIALS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _defining:  # one class object per name, whichever thread asks first
        if name not in globals():
            globals().update(_define_denials())
    cls: type[ReconcileError] = globals()[name]
    return cls


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _describe(decision: Decision) -> str:
    reason = decision.reason.value
    if decision.names_intent:
        what = f"intent {decision.intent_id} is {decision.outcome.value} ({reason})"
    else:
        what = f"the run was refused ({reason})"
    text = (
        f"agents-reconcile denied continuation of session {decision.session_id!r}: {what}. "
        f"{decision.reason.explanation} Evidence: {decision.evidence_text()}."
    )
    # As every hint of the command line: its options first, then ``--``, then the id.
    where = "(the application's --journal and --namespace go before the --)"
    if decision.names_intent and reason not in _STATE_REFUSALS:
        return (
            f"{text} For its evidence and the ways to resolve it: agents-reconcile show -- "
            f"{decision.intent_id} {where}"
        )
    session = shlex.quote(decision.session_id)
    return f"{text} The session's decisions: agents-reconcile trail -- {session} {where}"


# Refusals of the run's state itself (its remedy is a new run, not an operator's resolution).
_STATE_REFUSALS: Final = frozenset({"run_finished", "runstate_expired"})
