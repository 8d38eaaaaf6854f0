"""Calls a cancellation must neither cut short nor leave half done: one finished despite its
caller's cancellation (``despite_cancellation``), one left to run on in the background with what
it leaves put right afterwards (``outliving_cancellation``), one never started when its caller is
already being cancelled (``not_if_cancelled``), and a coroutine started outside a task finished
by one (``resumed``). Plain asyncio; no journal, store or session of their own."""

from __future__ import annotations

import asyncio
import inspect
import sys
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Protocol, TypeVar, cast

__all__ = [
    "Keeps",
    "caller_cancelled",
    "despite_cancellation",
    "not_if_cancelled",
    "outliving_cancellation",
    "resumed",
]

_T = TypeVar("_T")

_EAGER_START: bool = sys.version_info >= (3, 12)
"""Whether ``asyncio.Task`` takes ``eager_start`` (3.12 on)."""


class Keeps(Protocol):
    """What keeps a task running on in the background referenced until it ends (the session
    layer's registry of what a process has in flight)."""

    def keep(self, task: asyncio.Future[Any]) -> None: ...


async def despite_cancellation(awaitable: Awaitable[_T]) -> _T:
    """Finish ``awaitable`` even if the caller is cancelled meanwhile, then re-raise that: what
    records an uncertain write must not be cut short by the cancellation that made it so."""
    task = asyncio.ensure_future(awaitable)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    result = task.result()
    if cancelled is not None:
        raise cancelled
    return result


async def outliving_cancellation(
    awaitable: Awaitable[_T],
    in_flight: Keeps,
    afterwards: Callable[[asyncio.Future[_T]], Awaitable[None]],
    *,
    bound: float | None = None,
    eager: bool = False,
) -> _T:
    """Await ``awaitable`` (a journal call or a store write that may land after its caller
    gave up); if the caller is cancelled meanwhile, it gets its cancellation at once, while
    the call runs on to its end in the background and ``afterwards(call)`` then puts right
    what a caller that is gone can no longer act on (an intent recorded for an append that
    never started is cleared, a claim nobody will use is released, a write that landed is
    acknowledged); a call the cancellation reached before it started is never started, and
    ``afterwards`` gets it cancelled. Whenever the caller gets a cancellation, ``afterwards``
    runs. Kept referenced in ``in_flight`` until done. ``bound``: how long it may run
    on after the cancellation before it is cancelled too (None: as long as it takes).

    ``eager``: the call (a coroutine that captures nothing of the task running it: no
    timeouts, no task-local state) is started in the caller's task and handed to a task of
    its own only if it suspends, so a call that answers at once (an SQLite journal on the
    event loop) costs no task and no turn of the loop."""
    handling = sys.exc_info()[1]
    caller = asyncio.current_task()
    if caller is not None and caller.cancelling():
        try:
            await not_if_cancelled(awaitable)
        except asyncio.CancelledError:
            # Never started: ``afterwards`` still hears of it (a call cancelled before it ran).
            never: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
            never.cancel()
            in_flight.keep(asyncio.ensure_future(afterwards(never)))
            raise
    ended: asyncio.Future[None] | None = None
    if eager and inspect.iscoroutine(awaitable):
        try:
            pending = awaitable.send(None)
        except StopIteration as done:
            answer: _T = done.value
            return answer
        call: asyncio.Future[_T] = asyncio.ensure_future(resumed(awaitable, pending))
    elif inspect.iscoroutine(awaitable):
        loop = asyncio.get_running_loop()
        ended = loop.create_future()
        call = _own_task(loop, _telling(awaitable, ended))
    else:
        call = asyncio.ensure_future(awaitable)
    try:
        if ended is None:
            return await asyncio.shield(call)
        if not call.done():
            # What the caller awaits is ``ended``, not the call: a cancellation of the caller
            # cancels that, and the call runs on (``asyncio.shield``'s guarantee, one turn of
            # the loop sooner, since the call itself says when it ends). Its task ends in the
            # step that sets ``ended``, so it is done by the time the caller wakes.
            await ended
    except asyncio.CancelledError:
        if caller_cancelled():

            async def finish() -> None:
                await asyncio.wait({call}, timeout=bound)
                if not call.done():
                    call.cancel()
                    await asyncio.wait({call})
                await afterwards(call)

            in_flight.keep(asyncio.ensure_future(finish()))
            raise
        if not call.done():
            raise  # not the caller's, not the call's: pass it on
    except BaseException:
        if not call.done():
            raise  # raised in the caller (an interrupt), not by the call
    if ended is not None and not call.cancelled() and call.exception() is None:
        return call.result()
    # The call failed (a cancellation of its own included: a store that raised it): its own
    # exception, raised as if it had been awaited here, chained to what the caller was
    # handling (the call ran in a task of its own, which handled nothing).
    try:
        return call.result()
    except BaseException as failure:
        if failure.__context__ is None and handling is not None and handling is not failure:
            failure.__context__ = handling
        raise


def _own_task(
    loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, _T]
) -> asyncio.Task[_T]:
    """A task of its own for ``coroutine``, started at once where asyncio can (3.12 on): its
    first step runs now, as that task, so a call that does not suspend ends before this
    returns, at the cost of no turn of the loop; elsewhere its first step comes at the next."""
    if _EAGER_START:
        return asyncio.Task(coroutine, loop=loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
    return loop.create_task(coroutine)


async def _telling(awaitable: Awaitable[_T], ended: asyncio.Future[None]) -> _T:
    """``awaitable``'s result, with ``ended`` set once it has one (or raised), from the task
    that runs it: the caller waiting on ``ended`` wakes at the next turn of the loop, where a
    callback on the task (``asyncio.shield``'s way) would take one turn more."""
    try:
        return await awaitable
    finally:
        if not ended.done():
            ended.set_result(None)


async def not_if_cancelled(awaitable: Awaitable[Any] | None = None) -> None:
    """Raise the caller's cancellation if one is already on its way, before ``awaitable`` (not
    started yet, closed then) or anything else is handed to a task or a thread of its own
    that would outlive it: what never started lands nothing that would need putting right."""
    caller = asyncio.current_task()
    if caller is not None and caller.cancelling():
        try:
            await asyncio.sleep(0)  # delivers a cancellation still pending; else returns
        except asyncio.CancelledError:
            if awaitable is not None and inspect.iscoroutine(awaitable):
                awaitable.close()
            raise


def caller_cancelled() -> bool:
    """Whether the running task is being cancelled (not merely meeting a ``CancelledError``
    that something it awaited raised of its own)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


@types.coroutine
def resumed(coroutine: Coroutine[Any, Any, _T], pending: Any) -> Generator[Any, Any, _T]:
    """The rest of ``coroutine``, which suspended on ``pending`` (what it awaits) when it was
    started outside a task: driven by the task that runs this as if it had run it from the
    start (what ``yield from`` does, from a coroutine already under way)."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            coroutine.close()
            raise
        except BaseException as thrown:  # a cancellation, or what the awaited future raised
            try:
                pending = coroutine.throw(thrown)
            except StopIteration as done:
                return cast(_T, done.value)
            continue
        try:
            pending = coroutine.send(sent)
        except StopIteration as done:
            return cast(_T, done.value)
