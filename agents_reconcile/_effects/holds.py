"""What this process holds of effects, and what it finishes after a cancelled caller is gone.

A key is *held* while a task of this process runs its body, or settles its record after the
caller was cancelled: a body's worker thread that runs on (a sync body cannot be stopped),
a receipt or a journal write that may land anyway. Such work goes on in the background, kept
referenced, and the key stays held (and *finishing*) until it ends; a retry of the same key
in this process waits for it, bounded, instead of taking the key for abandoned.

Two owners mark a started record that nobody runs any more (neither parses as an ``Owner``,
so nobody takes them for a live one): ``ENDED_OWNER``, a body that ended without a receipt
(it raised or was cancelled: the outcome is unknown, as under a dead owner), and
``NEVER_STARTED_OWNER``, a call whose body never ran (the next call runs it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .._core.cancellation import not_if_cancelled

if TYPE_CHECKING:
    from .._backends.components import JournalEffects
    from .._core.effect_records import Effect

__all__ = [
    "ENDED_OWNER",
    "NEVER_STARTED_OWNER",
    "finish_in_background",
    "finishing",
    "hold",
    "let_go",
    "release",
    "running",
    "step",
    "wait_while_finishing",
]

ENDED_OWNER: Final = "nobody: the body ended without a receipt"
NEVER_STARTED_OWNER: Final = "nobody: the body never started"

_T = TypeVar("_T")
logger = logging.getLogger("agents_reconcile")
_POLL_SECONDS: Final = 0.02

_RUNNING: dict[str, object] = {}
"""The effect keys a task of this process runs (or settles) now, each with its holder."""
_FINISHING: dict[str, object] = {}
"""The held keys whose caller is gone: a background task settles them."""
_BACKGROUND: set[asyncio.Future[Any]] = set()
"""Those background tasks, kept referenced until they end."""


def running(key: str) -> bool:
    return key in _RUNNING


def finishing(key: str) -> bool:
    return key in _FINISHING


def hold(key: str, holder: object) -> None:
    """Hold ``key`` for ``holder`` (unless another holder of this process has it)."""
    _RUNNING.setdefault(key, holder)


def let_go(key: str, holder: object) -> None:
    """Let ``key`` go if ``holder`` holds it, unless it is finishing it in the background."""
    if _RUNNING.get(key) is holder and _FINISHING.get(key) is not holder:
        del _RUNNING[key]


def finish_in_background(key: str, holder: object, work: Coroutine[Any, Any, Any]) -> None:
    """Run ``work`` in the background with ``key`` held (and finishing) until it ends."""
    hold(key, holder)
    _FINISHING.setdefault(key, holder)
    task = asyncio.ensure_future(work)
    _BACKGROUND.add(task)

    def ended(done: asyncio.Future[Any]) -> None:
        _BACKGROUND.discard(done)
        if _FINISHING.get(key) is holder:
            del _FINISHING[key]
        let_go(key, holder)
        problem = None if done.cancelled() else done.exception()
        if problem is not None:
            logger.warning(
                "effect %s: settling its record after its caller was cancelled failed (%s); "
                "it stays started without a receipt",
                key,
                type(problem).__name__,
            )

    task.add_done_callback(ended)


async def wait_while_finishing(key: str, seconds: float) -> None:
    """Wait (at most ``seconds``) while this process settles ``key`` in the background.
    Polled: the task settling it may belong to another event loop."""
    deadline = time.monotonic() + seconds
    for _ in itertools.count():
        if key not in _FINISHING or time.monotonic() >= deadline:
            return
        await asyncio.sleep(_POLL_SECONDS)


async def step(
    key: str,
    holder: object,
    write: Awaitable[_T],
    bound: float,
    then: Callable[[_T], Awaitable[object]] | None = None,
) -> _T:
    """``write`` (a journal call). If the caller is cancelled meanwhile, the write may land
    anyway: it is waited out in the background (at most ``bound`` seconds), then ``then`` is
    given its result, with ``key`` held till both end; the cancellation goes on at once."""
    await not_if_cancelled(write)
    task = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:

        async def landed() -> None:
            result = await asyncio.wait_for(task, bound)
            if then is not None:
                await asyncio.wait_for(then(result), bound)

        finish_in_background(key, holder, landed())
        raise


async def release(
    effects: JournalEffects, effect: Effect, owner: str, error_digest: str | None = None
) -> bool:
    """Record that nobody runs ``effect``'s body any more (``owner`` says why), with the
    digest of the error output the model was shown, if any; whether it was recorded."""
    errors = effect.error_digests
    if error_digest is not None and error_digest not in errors:
        errors = (*errors, error_digest)
    released = dataclasses.replace(effect, owner=owner, error_digests=errors, age=None)
    return await effects.restart(released, expect_owner=effect.owner)
