"""Writes a store refused outright: a known outcome, recorded as a decision, raised as
``WriteRefused``.

A Conversations write (``conversation_calls``) whose request the service answers with a status
that proves the request stored nothing and would be refused again (``_core.refusals``) raises
``RequestRefused``, saying how many of the call's items were stored before it. Whoever was
writing settles the intent with that: the writer for its own append (claiming the intent it
holds in flight first), the settler for a replay (under the claim it holds). The decision is
``write_refused``, action ``dropped``: what landed before the refused request stays in the
history, the refused request and any after it are never sent. Where the journal cannot record
it, the append is left pending like any failed one; its next replay is refused again, and
recorded then.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from .._backends.journal import IntentState
from .._core.records import Action, Decision, Outcome, PendingWrite, Reason
from .._core.refusals import refusal_evidence
from ..errors import JournalError, RecordError, WriteRefused
from .claims import take

if TYPE_CHECKING:
    from .settler import Settler
    from .state import SessionState

__all__ = ["RefusedWrites", "RequestRefused"]

logger = logging.getLogger("agents_reconcile")

Context = MutableMapping[str, Any] | None


class RequestRefused(Exception):
    """A request of a session's own write was refused outright (``_core.refusals``): the
    ``landed`` items of the call before it were stored, the ``size`` items of the refused
    request and every one after it were not. ``cause`` is the store's own exception."""

    def __init__(
        self,
        cause: Exception,
        *,
        status: int,
        code: str | None,
        param: str | None,
        message: str,
        landed: int,
        size: int,
    ) -> None:
        super().__init__(f"request refused outright with HTTP {status} after {landed} items")
        self.cause = cause
        self.status = status
        self.code = code
        self.param = param
        self.message = message
        self.landed = landed
        self.size = size


class RefusedWrites:
    """Settles one session's writes that its store refused outright."""

    def __init__(self, state: SessionState, settler: Settler) -> None:
        self._client = state.client
        self._in_flight = state.in_flight
        self._settler = settler

    async def refused_append(
        self, intent: PendingWrite, refusal: RequestRefused, context: Context, *, recorded: bool
    ) -> WriteRefused | None:
        """This process's own append of ``intent`` was refused: claim the intent it holds in
        flight (``recorded``: the journal holds it; else it is recorded first) and settle it.
        None when that could not be done (the journal failed, or someone else holds the
        intent): the caller leaves it pending as any failed append."""
        client = self._client
        try:
            if not recorded:
                await client.call(
                    client.journal.record, intent, state=IntentState.FAILED, owner=client.owner
                )
            entry = await client.call(client.journal.get, intent.intent_id)
            if entry is None or entry.owner != client.owner:
                return None
            mine, now = await take(client, entry, self._in_flight)
            if not mine or now is None:
                return None
            return await self._settle(intent, refusal, context, before=0, fence=now.fence)
        except (JournalError, RecordError):
            logger.warning(
                "session %s: could not record the refusal of intent %s; it stays pending",
                client.session_id,
                intent.intent_id,
                exc_info=True,
            )
            return None

    async def refused_replay(
        self,
        intent: PendingWrite,
        refusal: RequestRefused,
        context: Context,
        *,
        before: int,
        fence: int | None,
        evidence: Mapping[str, Any],
    ) -> WriteRefused:
        """The settler's replay of ``intent`` (its items from ``before`` on, the judgement's
        ``evidence``) was refused: settle it under the settler's claim ``fence``."""
        return await self._settle(
            intent, refusal, context, before=before, fence=fence, evidence=evidence
        )

    async def _settle(
        self,
        intent: PendingWrite,
        refusal: RequestRefused,
        context: Context,
        *,
        before: int,
        fence: int | None,
        evidence: Mapping[str, Any] | None = None,
    ) -> WriteRefused:
        client = self._client
        start = before + refusal.landed
        found = refusal_evidence(
            status=refusal.status,
            code=refusal.code,
            param=refusal.param,
            start=start,
            size=refusal.size,
            batch=len(intent.batch_digests),
        )
        outcome = Outcome.PARTIAL if start else Outcome.UNCHANGED
        decision = client.decision(
            intent, outcome, Reason.WRITE_REFUSED, Action.DROPPED, {**(evidence or {}), **found}
        )
        await client.call(client.journal.settle, decision, owner=client.owner, fence=fence)
        await self._settler.after_settlement(intent, context, Action.DROPPED, vouched=False)
        client.trail.decided(decision)
        sealed = client.keyring.current is not None
        error = WriteRefused(
            _describe(decision, refusal, found, sealed=sealed),
            decision=decision,
            status=refusal.status,
            code=refusal.code,
            param=found.get("param"),
            service_message=None if sealed else refusal.message,
            refused=range(start, start + refusal.size),
            item=found.get("item"),
            landed=start,
            dropped=len(intent.batch_digests) - start,
        )
        if not sealed:
            # Drop-in: code that catches the service's own exception (openai.BadRequestError)
            # around a run keeps catching it; where payloads are sealed its text (which may
            # quote an item) goes nowhere, and a plain WriteRefused is raised.
            error = _as_also(error, refusal.cause)
        # Where payloads are sealed, the service's own exception is neither the cause nor
        # shown as the context.
        error.__cause__ = None if sealed else refusal.cause
        error.__suppress_context__ = True
        return error


_BOTH: dict[type[BaseException], type[WriteRefused]] = {}


def _as_also(error: WriteRefused, cause: BaseException) -> WriteRefused:
    """``error`` as an instance of ``WriteRefused`` and of ``cause``'s class, with the
    service's answer (``cause``'s attributes: status code, body, response) where that class's
    code reads it. ``error`` itself when the two cannot be combined."""
    kind = type(cause)
    both = _BOTH.get(kind)
    if both is None:
        try:
            both = type(
                "WriteRefused", (WriteRefused, kind), {"__module__": WriteRefused.__module__}
            )
        except TypeError:
            return error
        both.__qualname__ = WriteRefused.__qualname__
        _BOTH[kind] = both
    combined = both.__new__(both)
    combined.__dict__.update(getattr(cause, "__dict__", {}))
    combined.__dict__.update(error.__dict__)
    combined.args = error.args
    return combined


def _describe(
    decision: Decision, refusal: RequestRefused, found: Mapping[str, Any], *, sealed: bool
) -> str:
    first, end = found["refused"]
    answer = f"HTTP {refusal.status}"
    if "code" in found:
        answer += f" {found['code']}"
    if not sealed and refusal.message:
        answer += f": {refusal.message}"
    named = f"; its answer names item {found['item']}" if "item" in found else ""
    if "param" in found:
        named += f" ({found['param']})"
    landed = found["landed"]
    stayed = (
        f"the {landed} item(s) before them were stored and stay"
        if landed
        else "nothing of the batch was stored"
    )
    return (
        f"agents-reconcile: the store refused the write of session {decision.session_id!r} "
        f"outright ({answer}): items {first} to {end - 1} of the "
        f"{found['landed'] + found['dropped']}-item batch were not stored{named}. That answer "
        f"proves it, and that sending them again would be refused the same way: {stayed}, and "
        f"the {found['dropped']} item(s) from item {first} on are dropped, never sent. Intent "
        f"{decision.intent_id} is settled ({decision.reason.value}), and the session goes on "
        f"without them. For the decision: agents-reconcile show -- {decision.intent_id} (the "
        "application's --journal and --namespace go before the --)"
    )
