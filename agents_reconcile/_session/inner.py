"""Calling the wrapped session as the SDK would: ``wrapper=`` only to a session whose four
history methods all take it, ``limit`` only to a ``get_items`` that takes it; and counting this
wrapper's own writes.

Also the marker for reads the inner session makes through the wrapper while it holds a lock of
its own (compaction's ``_get_items_with_generation``): nothing may be settled, and so written,
from inside such a read.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .._core.fingerprint import FINGERPRINT_SCHEME
from .._core.session_protocol import HISTORY_METHODS

__all__ = [
    "InnerSession",
    "accepts",
    "finishes_own_writes",
    "reconciling_allowed",
    "takes_wrapper",
    "without_reconciling",
]

_NO_RECONCILE: ContextVar[bool] = ContextVar("agents_reconcile_no_reconcile", default=False)


def reconciling_allowed() -> bool:
    """False inside a read that the inner session holds a lock around."""
    return not _NO_RECONCILE.get()


@contextmanager
def without_reconciling() -> Iterator[None]:
    token = _NO_RECONCILE.set(True)
    try:
        yield
    finally:
        _NO_RECONCILE.reset(token)


def accepts(method: Any, name: str) -> bool:
    """Whether ``method`` declares a parameter ``name`` that can be passed by keyword
    (``**kwargs`` does not count, as for the SDK); any failure to inspect it means no, as it
    does for the SDK (a legacy signature)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except Exception:
        return False
    return any(
        p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in parameters
    )


def takes_wrapper(session: Any) -> bool:
    """Whether ``get_items``, ``add_items``, ``pop_item`` and ``clear_session`` all accept
    ``wrapper``: the SDK's test for a context-aware session."""
    try:
        methods = [getattr(session, name) for name in HISTORY_METHODS]
    except Exception:
        return False
    return all(accepts(method, "wrapper") for method in methods)


def finishes_own_writes(session: Any) -> bool:
    """Whether ``session``'s ``add_items`` waits its own write out despite a cancellation of
    its caller, as the SDK's sessions do through the SDK's ``_await_mutation`` (recognised in
    the method's code; a session that overrides the method, or an SDK that renames the
    helper, is not recognised, and is then waited out by the writer instead)."""
    method = getattr(type(session), "add_items", None)
    names = getattr(getattr(method, "__code__", None), "co_names", ())
    return isinstance(names, tuple) and "_await_mutation" in names


class InnerSession:
    """The wrapped session, called the way it expects."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.own_writes = 0
        """Appends made through this wrapper so far: a read one of them overtook is not kept."""
        self._takes_limit = accepts(session.get_items, "limit")
        self.finishes_own_writes = finishes_own_writes(session)
        """Whether the session's own ``add_items`` waits its write out when its caller is
        cancelled (then its outcome is settled by the time the cancellation arrives here)."""
        self.takes_wrapper = takes_wrapper(session)
        """Whether the SDK would hand this session the run's context: only when all four
        history methods accept ``wrapper`` (one that takes it on some is a legacy session)."""
        self.chunk: int | None = None
        """The most items one request of the session's writes holds (None: a batch is written
        all or nothing)."""
        self.scheme: str = FINGERPRINT_SCHEME
        """The fingerprint scheme the session's items are digested under."""

    async def call(self, name: str, wrapper: Any, *args: Any, **kwargs: Any) -> Any:
        method: Callable[..., Any] = getattr(self.session, name)
        if wrapper is not None and self.takes_wrapper:
            kwargs["wrapper"] = wrapper
        result = method(*args, **kwargs)
        if inspect.isawaitable(result):
            return await result
        return result

    async def read(self, limit: int | None, wrapper: Any) -> list[Any]:
        if limit is None:
            items = await self.call("get_items", wrapper)
        elif self._takes_limit:
            items = await self.call("get_items", wrapper, limit=limit)
        else:
            # A legacy session without ``limit``: read everything and keep the tail.
            items = await self.call("get_items", wrapper)
            items = items[-limit:] if limit > 0 else items
        return list(items)

    async def append(self, items: list[Any], wrapper: Any) -> None:
        self.own_writes += 1
        # ``call("add_items", ...)`` without its lookup: once per append.
        if wrapper is not None and self.takes_wrapper:
            result = self.session.add_items(items, wrapper=wrapper)
        else:
            result = self.session.add_items(items)
        # A coroutine (every async session) is told apart without the ABC check.
        if inspect.iscoroutine(result) or inspect.isawaitable(result):
            await result
