"""The SDK's capability hooks, forwarded when (and only when) the inner session has them.

The SDK decides what a session can do by looking for these attributes. Some are handed on as
they are; the others are guarded: pending intents are settled before the inner session takes
its own lock (a replay inside its callback would wait for that lock forever), and what the
wrapper remembers of the tail is forgotten after compaction rewrote the history.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from .inner import reconciling_allowed, without_reconciling

__all__ = ["FORWARDED", "Guard", "forwarded"]

_AS_IS: Final = frozenset(
    {"_defer_compaction", "_get_deferred_compaction_response_id", "_ignore_ids_for_matching"}
)
_GUARDED: Final = frozenset(
    {"run_compaction", "_get_items_with_generation", "_add_items_with_generation"}
)
FORWARDED: Final = _AS_IS | _GUARDED
"""Names of the capability hooks a wrapper may forward."""


@dataclass(frozen=True)
class Guard:
    """What a guarded hook needs of the wrapper."""

    enabled: bool
    settle: Callable[[], Awaitable[Any]]
    """Settle the session's pending intents (no run context)."""
    forget_tail: Callable[[], None]


def forwarded(name: str, target: Any, guard: Guard) -> Any:
    """``target`` (the inner session's hook ``name``) as the wrapper presents it."""
    if name in _AS_IS:
        return target
    if name == "_get_items_with_generation":
        return _get_with_generation(target, guard)
    if name == "_add_items_with_generation":
        return _add_with_generation(target, guard)
    return _compaction(target, guard)


def _get_with_generation(target: Any, guard: Guard) -> Any:
    async def hook(callback: Callable[[], Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        # Settle before the inner session takes its lock: a replay inside the callback would
        # wait for that same lock forever.
        if guard.enabled and reconciling_allowed():
            await guard.settle()
        with without_reconciling():
            return await target(callback, *args, **kwargs)

    return hook


def _add_with_generation(target: Any, guard: Guard) -> Any:
    async def hook(write: Callable[[], Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        if guard.enabled and reconciling_allowed():
            await guard.settle()
        return await target(write, *args, **kwargs)

    return hook


def _compaction(target: Any, guard: Guard) -> Any:
    async def hook(*args: Any, **kwargs: Any) -> Any:
        if guard.enabled:
            await guard.settle()
        try:
            return await target(*args, **kwargs)
        finally:
            # Compaction rewrites history: what the wrapper remembers of the tail is void.
            guard.forget_tail()

    return hook
