"""``ReconcilingSession`` around an ``OpenAIConversationsSession``: an instance of both.

The SDK treats a Conversations session by its type (the reasoning-id policy, which items it
sanitises or never sends, ids ignored when it matches items, partial requests on resumed
writes), so ``ReconcilingSession(inner)`` returns, for one, an instance of a class deriving
from both (``for_conversations``: ``ConversationsSide`` first, then the wrapper's class, then
the SDK's): every ``isinstance`` check the SDK makes sees what it would see unwrapped, and every
call goes through the wrapper.

A conversation may not exist yet (``OpenAIConversationsSession()`` creates it on first use,
and ``clear_session`` deletes it, the next use making another): this wrapper's parts, which
are keyed by the conversation's id, are then made on first use, once the inner session has
created it. Until then ``session_id`` raises ``ValueError``, as the SDK's session does.

Writes go in requests of 20 items with the client's retries off (``conversation_calls``); the
items are digested as the service gives them back (``_core/conversation_items``); a write that
stopped part-way is judged request by request (``classify``: PARTIAL) and completed once.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from agents.memory import OpenAIConversationsSession

from ..errors import ConfigurationError, UnsupportedSession
from .admission import Gating

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.run_context import RunContextWrapper

    from .._core.policy import Resolution
    from .._core.records import Decision, PendingWrite
    from .session import ReconcilingSession

    _Side = ReconcilingSession
else:
    _Side = object

__all__ = ["ConversationsSide", "for_conversations"]

_NOT_YET = (
    "Session ID not yet available: the conversation is created on first use. Call get_items(), "
    "add_items() with a non-empty list, or run the agent with this session first."
)


def known_id(session: Any) -> str | None:
    """The conversation's id if the session has one now, else None (never creating one)."""
    try:
        value = session.session_id
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


class ConversationsSide(_Side):
    """What a ``ReconcilingSession`` (or a subclass of it) adds around an
    ``OpenAIConversationsSession``: it comes first in the class ``for_conversations`` makes."""

    def _binds_now(self) -> bool:
        self._binding = asyncio.Lock()
        self._bound_id: str | None = None
        if known_id(self._inner) is not None:
            return True
        inner = self._inner
        if getattr(
            type(inner), "_get_session_id", None
        ) is OpenAIConversationsSession._get_session_id and not hasattr(inner, "_session_id_lock"):
            # A subclass that skipped the SDK's __init__: no id, and no way to make one.
            raise UnsupportedSession(
                f"{type(inner).__name__} has no conversation id and cannot create one (its "
                "__init__ did not run OpenAIConversationsSession's): give it a conversation_id"
            )
        return False

    async def _bound(self) -> None:
        """Make the parts for the conversation, creating it first if it does not exist."""
        if self._bound_id is not None:
            return
        async with self._binding:
            if self._bound_id is not None:
                return
            conversation = known_id(self._inner)
            if conversation is None:
                create = getattr(self._inner, "_get_session_id", None)
                if not callable(create):
                    raise UnsupportedSession(
                        f"{type(self._inner).__name__} has no conversation id and no way to "
                        "create one (_get_session_id)"
                    )
                created = await create()
                conversation = known_id(self._inner) or created
            if not isinstance(conversation, str):
                raise UnsupportedSession(
                    f"{type(self._inner).__name__} created no conversation id on first use"
                )
            self._bind(conversation)

    def _unbind_if_cleared(self) -> None:
        """After ``clear_session`` deleted the conversation: the next use binds to the one it
        creates. Nothing of the deleted one is pending (it was settled before it was cleared)."""
        if known_id(self._inner) is None:
            self._bound_id = None

    @property
    def session_id(self) -> str:
        """The conversation's id (``ValueError`` before the conversation exists)."""
        bound = self.__dict__.get("_bound_id")
        if bound is None:
            raise ValueError(_NOT_YET)
        return str(bound)

    @session_id.setter
    def session_id(self, value: str) -> None:
        # Set as the parts are made: the id they are keyed by.
        self.__dict__["_bound_id"] = value

    # -- the SDK's calls, each after the parts are made --------------------------------------

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        await self._bound()
        return await super().get_items(limit, wrapper=wrapper)

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        if not items:
            return
        await self._bound()
        await super().add_items(items, wrapper=wrapper)

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        await self._bound()
        return await super().pop_item(wrapper=wrapper)

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        if self._bound_id is None and known_id(self._inner) is None:
            return  # no conversation: nothing to clear, and none is created for it
        await self._bound()
        await self._writer.flush_clearing()
        await super().clear_session(wrapper=wrapper)
        self._unbind_if_cleared()

    async def _get_session_id(self) -> str:
        await self._bound()
        return self.session_id

    async def _get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        return await self.get_items(limit)

    async def _clear_session_id(self) -> None:
        raise ConfigurationError(
            "a ReconcilingSession's conversation is cleared with clear_session(), which "
            "settles its pending writes first"
        )

    # -- controls ----------------------------------------------------------------------------

    async def pending(self) -> list[PendingWrite]:
        if self._bound_id is None and known_id(self._inner) is None:
            return []
        await self._bound()
        return await super().pending()

    async def reconcile(self, context: Any = None) -> list[Decision]:
        if self._bound_id is None and known_id(self._inner) is None:
            return []
        await self._bound()
        return await super().reconcile(context)

    async def resolve(
        self,
        intent_id: str,
        outcome: Resolution | str,
        *,
        reason: str,
        actor: str | None = None,
        override: bool = False,
    ) -> Decision:
        await self._bound()
        return await super().resolve(
            intent_id, outcome, reason=reason, actor=actor, override=override
        )

    async def resolve_effect(
        self,
        key: str,
        outcome: str,
        *,
        reason: str,
        actor: str | None = None,
        output: Any = None,
    ) -> Decision:
        await self._bound()
        return await super().resolve_effect(key, outcome, reason=reason, actor=actor, output=output)

    async def decisions(self, limit: int = 100) -> list[Decision]:
        if self._bound_id is None and known_id(self._inner) is None:
            return []
        await self._bound()
        return await super().decisions(limit)

    def _gatekeeper(self) -> Gating:
        if self._bound_id is not None:
            return super()._gatekeeper()
        return _LateAdmission(self)

    def __repr__(self) -> str:
        if self._bound_id is None:
            return f"ReconcilingSession({self._inner!r}, conversation not created yet)"
        return super().__repr__()


_MADE: dict[type[Any], type[Any]] = {}


def for_conversations(cls: type[Any]) -> type[Any]:
    """The class ``cls(inner)`` is for a Conversations session: ``cls`` (``ReconcilingSession``
    or a subclass of it) with ``ConversationsSide`` before it and ``OpenAIConversationsSession``
    after it, so the wrapper is an instance of both (made once per class)."""
    made = _MADE.get(cls)
    if made is None:
        made = _MADE[cls] = type(
            cls.__name__, (ConversationsSide, cls, OpenAIConversationsSession), {}
        )
        made.__qualname__ = cls.__qualname__
        made.__module__ = cls.__module__
    return made


class _LateAdmission(Gating):
    """The gate's view of a wrapper whose conversation is made on first use: the session's
    own admission once its parts are made, asked for at each call."""

    session: ConversationsSide

    def __init__(self, session: ConversationsSide) -> None:
        self.session = session

    @property
    def enabled(self) -> bool:
        return self.session.config.active

    @property
    def merges_retried_input(self) -> bool:
        return self.session.config.merge_retried_input

    async def admit(self, context: MutableMapping[str, Any] | None) -> None:
        await self.session._bound()
        await self.session._admission.admit(context)

    async def admit_tool(self, context: MutableMapping[str, Any] | None, tool_context: Any) -> None:
        await self.session._bound()
        await self.session._admission.admit_tool(context, tool_context)

    def is_retried_input(self, history: Sequence[Any], new_input: Sequence[Any]) -> bool:
        if self.session._bound_id is None:
            return False
        retried: bool = self.session._admission.is_retried_input(history, new_input)
        return retried

    def final_output(self, context: MutableMapping[str, Any] | None) -> None:
        # A run that reached its final output has written to its conversation by then; one
        # never bound has nothing of it to protect.
        if self.session._bound_id is not None:
            self.session._admission.final_output(context)
