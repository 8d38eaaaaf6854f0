"""The SDK's capability hooks, forwarded when (and only when) the inner session has them.

The SDK decides what a session can do by looking for these attributes. Some are handed on as
they are; the others are guarded: pending intents are settled before the inner session takes
its own lock (a replay inside its callback would wait for that lock forever), and what the
wrapper remembers of the tail is forgotten after compaction rewrote the history. A store's
suffix snapshot (what the SDK's compaction replaces atomically) is handed out the same way:
settled first, the memory forgotten once it was replaced.

A guarded hook presents the inner method's own signature (``functools.wraps``): the SDK decides
what to pass by inspecting it (``wrapper=`` goes only to a method that declares it), so a bare
``(*args, **kwargs)`` forwarder would silently change the call, turning an automatic
compaction into a manual one of the whole history.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, Final

from .inner import reconciling_allowed, without_reconciling

__all__ = ["FORWARDED", "NOT_FORWARDED", "Guard", "forwarded"]

_AS_IS: Final = frozenset(
    {"_defer_compaction", "_get_deferred_compaction_response_id", "_ignore_ids_for_matching"}
)
_GUARDED: Final = frozenset(
    {
        "run_compaction",
        "_get_items_with_generation",
        "_add_items_with_generation",
        "_get_compaction_snapshot",
        "_read_compaction_items",
    }
)
FORWARDED: Final = _AS_IS | _GUARDED
"""Names of the capability hooks a wrapper may forward."""

NOT_FORWARDED: Final = {
    "_atomic_replace_items": "looked up on the session's type to replace the whole history in "
    "one step; without it the SDK clears and appends through the wrapper, so each write is "
    "journaled and judged like any other (forwarded, the replacement would bypass the journal)",
}
"""Hooks the SDK looks up on a session that the wrapper deliberately does not offer, and why."""


@dataclass(frozen=True)
class Guard:
    """What a guarded hook needs of the wrapper."""

    enabled: bool
    settle: Callable[[], Awaitable[Any]]
    """Settle the session's pending intents (no run context)."""
    forget_tail: Callable[[], None]
    """The history was rewritten: what this wrapper remembers of the tail is void."""


def forwarded(name: str, target: Any, guard: Guard) -> Any:
    """``target`` (the inner session's hook ``name``) as the wrapper presents it."""
    if name in _AS_IS or not callable(target):
        return target
    if name == "_get_items_with_generation":
        hook = _get_with_generation(target, guard)
    elif name == "_add_items_with_generation":
        hook = _add_with_generation(target, guard)
    elif name == "_get_compaction_snapshot":
        hook = _snapshot(target, guard)
    elif name == "_read_compaction_items":
        hook = _read(target, guard)
    else:
        hook = _compaction(target, guard)
    # The SDK inspects what it calls: present the inner method's name, doc and signature.
    return wraps(target)(hook)


def _get_with_generation(target: Any, guard: Guard) -> Any:
    async def hook(callback: Callable[[], Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        # Settle before the inner session takes its lock: a replay inside the callback would
        # wait for that same lock forever.
        if guard.enabled and reconciling_allowed():
            await guard.settle()
        with without_reconciling():
            return await _call(target, callback, *args, **kwargs)

    return hook


def _read(target: Any, guard: Guard) -> Any:
    """A read of the store's own view for compaction (an encrypted store's visible items):
    settled first, as every read through the wrapper is."""

    async def hook(*args: Any, **kwargs: Any) -> Any:
        if guard.enabled and reconciling_allowed():
            await guard.settle()
        with without_reconciling():
            return await _call(target, *args, **kwargs)

    return hook


def _add_with_generation(target: Any, guard: Guard) -> Any:
    async def hook(write: Callable[[], Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        if guard.enabled and reconciling_allowed():
            await guard.settle()
        return await _call(target, write, *args, **kwargs)

    return hook


def _compaction(target: Any, guard: Guard) -> Any:
    async def hook(*args: Any, **kwargs: Any) -> Any:
        if guard.enabled:
            await guard.settle()
        try:
            return await _call(target, *args, **kwargs)
        finally:
            # Compaction rewrites history: what the wrapper remembers of the tail is void.
            guard.forget_tail()

    return hook


def _snapshot(target: Any, guard: Guard) -> Any:
    async def hook(*args: Any, **kwargs: Any) -> Any:
        if guard.enabled and reconciling_allowed():
            await guard.settle()
        snapshot = await _call(target, *args, **kwargs)
        replace = getattr(snapshot, "replace_suffix", None)
        if replace is None:
            return snapshot

        async def replace_suffix(start: int, output: list[Any]) -> Any:
            try:
                return await replace(start, output)
            finally:
                guard.forget_tail()

        return dataclasses.replace(snapshot, replace_suffix=replace_suffix)

    return hook


async def _call(target: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``target`` as the SDK does: its result awaited only when it is awaitable."""
    result = target(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result
