"""Calling an ``OpenAIConversationsSession``: its writes made so that a write that stopped
part-way can be judged, request by request.

The Conversations API takes at most ``CHUNK`` items per request, each request all or nothing.
A batch is written here as requests of ``CHUNK`` items from its own first item (the boundaries
the intent records, ``PendingWrite.chunk``), with the client's automatic retries off: a retried
request whose first answer was lost would store its items twice, and return normally. A caller
cancelled while a request is under way gets no further request sent: its cancellation is
delivered between requests, as the SDK delivers it.

A request the service refuses outright (an answer that proves it stored nothing and would be
refused again: ``_core.refusals``) raises ``RequestRefused``, saying how many of the call's
items were stored before it, for whoever was writing to settle (``refused_writes``).

A subclass that writes its own way (``add_items`` overridden) is called as it is, with the
whole batch.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, Final

import openai
from agents.memory import OpenAIConversationsSession

from .._core.fingerprint import CONVERSATION_SCHEME
from .._core.refusals import refused_outright
from .._sdk import CONVERSATIONS, Feature, require
from .inner import InnerSession
from .refused_writes import RequestRefused

__all__ = ["CHUNK", "ConversationCalls"]

CHUNK: Final = 20
"""The most items the Conversations API takes in one items-create request."""


class ConversationCalls(InnerSession):
    """An ``OpenAIConversationsSession`` called the way its writes can be reconciled."""

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.chunk = CHUNK
        self.scheme = CONVERSATION_SCHEME
        require(CONVERSATIONS)
        if self.direct:
            # Its writes are made here, through the session's own client: an SDK that keeps
            # the client elsewhere is named, never worked around with the SDK's own requests.
            require(
                Feature(
                    "agents.memory.OpenAIConversationsSession._openai_client",
                    CONVERSATIONS.needed_for,
                    lambda: hasattr(session, "_openai_client"),
                )
            )

    @property
    def direct(self) -> bool:
        """Whether writes are made here, request by request: the session's ``add_items`` is
        the SDK's own (not overridden, nor replaced on the object)."""
        method = getattr(self.session, "add_items", None)
        return getattr(method, "__func__", None) is OpenAIConversationsSession.add_items

    @property
    def finishes_own_writes(self) -> bool:
        # Written here, a cancelled caller's request is waited out by the writer (bounded),
        # and no request starts after the cancellation (``_write``).
        return False if self.direct else self._own_finishing

    @finishes_own_writes.setter
    def finishes_own_writes(self, value: bool) -> None:
        self._own_finishing = value

    def append(self, items: list[Any], wrapper: Any) -> Coroutine[Any, Any, None]:
        if not self.direct:
            return super().append(items, wrapper)
        self.own_writes += 1
        # The caller is taken now: the write may run on in a task of its own after it.
        return self._write(items, asyncio.current_task())

    async def _write(self, items: list[Any], caller: asyncio.Task[Any] | None) -> None:
        session = self.session
        conversation_id = await session._get_session_id()
        client = session._openai_client
        with_options = getattr(client, "with_options", None)
        if callable(with_options):
            client = with_options(max_retries=0)
        lock = getattr(session, "_mutation_lock", None)
        async with lock if isinstance(lock, asyncio.Lock) else contextlib.nullcontext():
            for offset in range(0, len(items), CHUNK):
                if offset and caller is not None and caller.cancelling():
                    raise asyncio.CancelledError(
                        f"cancelled after {offset} of {len(items)} items were written"
                    )
                request = items[offset : offset + CHUNK]
                try:
                    await client.conversations.items.create(
                        conversation_id=conversation_id, items=request
                    )
                except openai.APIStatusError as exc:
                    if not refused_outright(exc.status_code):
                        raise
                    raise RequestRefused(
                        exc,
                        status=exc.status_code,
                        code=exc.code,
                        param=exc.param,
                        message=_service_message(exc),
                        landed=offset,
                        size=len(request),
                    ) from exc


def _service_message(error: openai.APIStatusError) -> str:
    """The message of the service's error body (the client's own text prefixes the status)."""
    body = error.body
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else error.message
