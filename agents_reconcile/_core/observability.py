"""The decision trail where an application already looks: each reconciliation of a session,
each judgement of an intent against a fresh read, and each decision (granted, replayed,
denied, resolved) as a span in the run's own trace (the SDK's custom spans, named
``agents_reconcile.*``), and as a structured record on the ``agents_reconcile`` logger (its
data under the record's ``agents_reconcile`` attribute).

Payload-free by construction: only ids, digests, counts, revisions, states and reasons, the
same fields the journal's decisions hold; never an item.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from .records import Action

if TYPE_CHECKING:
    from .classify import Verdict
    from .records import Decision

__all__ = ["DEFERRED_MAX", "LOGGER", "SPAN_PREFIX", "Trail", "judged"]

LOGGER: Final = logging.getLogger("agents_reconcile")
SPAN_PREFIX: Final = "agents_reconcile."
_EXTRA: Final = "agents_reconcile"
DEFERRED_MAX: Final = 64
# Decisions after which the run may not go on: worth a warning.
_STOPPED: Final = frozenset({Action.DENIED, Action.LEFT_PENDING})


def _tracing() -> bool:
    from agents.tracing import get_current_trace

    return get_current_trace() is not None


class Trail:
    """One session's trail in traces and logs. The SDK reads a fresh run's history (where
    pending writes are settled) before it opens the run's trace: what happens outside a trace
    is kept (the newest ``DEFERRED_MAX``) and shown in the next trace the gate runs in, as
    spans marked ``deferred`` with the time they happened."""

    def __init__(self) -> None:
        self._deferred: deque[tuple[str, dict[str, Any]]] = deque(maxlen=DEFERRED_MAX)

    @contextmanager
    def step(self, name: str, **data: Any) -> Iterator[dict[str, Any]]:
        """A span ``agents_reconcile.<name>`` around the block; the block may add to the
        yielded data (the span shows it as it ends). A DEBUG record follows."""
        try:
            if _tracing():
                from agents.tracing import custom_span

                with custom_span(SPAN_PREFIX + name, data):
                    yield data
            else:
                data["at"] = time.time()
                try:
                    yield data
                finally:
                    self._deferred.append((name, data))
        except BaseException as exc:
            # The type only: an exception's text may quote what it failed on.
            data["error"] = type(exc).__name__
            raise
        finally:
            if LOGGER.isEnabledFor(logging.DEBUG):
                LOGGER.debug("%s %s", name, _line(data), extra={_EXTRA: {"step": name, **data}})

    def decided(self, decision: Decision) -> None:
        """A decision, made and stored: a span of its own, and an INFO record (WARNING when
        it stops a run, so an application that logs only warnings sees every denial)."""
        data = {
            "session_id": decision.session_id,
            "intent_id": decision.intent_id,
            "outcome": decision.outcome.value,
            "reason": decision.reason.value,
            "action": decision.action.value,
            "evidence": dict(decision.evidence),
        }
        if _tracing():
            from agents.tracing import custom_span

            with custom_span(SPAN_PREFIX + "decision", data):
                pass
        else:
            self._deferred.append(("decision", {**data, "at": decision.decided_at}))
        level = logging.WARNING if decision.action in _STOPPED else logging.INFO
        if LOGGER.isEnabledFor(level):
            LOGGER.log(
                level,
                "session %s: intent %s %s (%s) -> %s. %s",
                decision.session_id,
                decision.intent_id,
                decision.outcome.value,
                decision.reason.value,
                decision.action.value,
                decision.reason.explanation,
                extra={_EXTRA: {"step": "decision", **data}},
            )

    def append_failed(
        self, session_id: str, intent_id: str, state: str, error: BaseException, note: str
    ) -> None:
        """An append that raised, its outcome unknown: a WARNING record at that moment, with
        the intent id, so that what a logger prints by default says the write is pending and
        will be settled (the raised exception keeps the store's own type and text, and says
        the same only in its notes). The error's type only: its text may quote an item."""
        if LOGGER.isEnabledFor(logging.WARNING):
            data = {
                "step": "append_failed",
                "session_id": session_id,
                "intent_id": intent_id,
                "state": state,
                "error": type(error).__name__,
            }
            LOGGER.warning(
                "session %s: append failed (%s); %s",
                session_id,
                type(error).__name__,
                note.removeprefix("agents-reconcile: "),
                extra={_EXTRA: data},
            )

    def flush(self) -> None:
        """Inside a trace, show what happened before it (oldest first)."""
        if not self._deferred or not _tracing():
            return
        from agents.tracing import custom_span

        while self._deferred:
            name, data = self._deferred.popleft()
            with custom_span(SPAN_PREFIX + name, {**data, "deferred": True}):
                pass


def judged(data: dict[str, Any], verdict: Verdict) -> None:
    """Add a judgement's outcome and payload-free evidence to a step's data."""
    data.update(outcome=verdict.outcome.value, reason=verdict.reason.value)
    data["evidence"] = dict(verdict.evidence)


def _line(data: dict[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in data.items() if key != "evidence")
