"""How a request is cancelled in the cancellation matrix, and a store whose write lands late.

A mode is one way a client's request ends early: its task is cancelled, a timeout around it
expires, a sibling in its task group fails, or its streamed result is cancelled (at once, or
after the turn). ``cancelled_request`` runs one request with a crash point armed whose action
triggers the mode: the action runs synchronously in the code at that point, so the
cancellation arrives at that code's next await (the timeout's and the sibling's at the loop's
next turn, as they do in life).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal

from agents import RunResultStreaming

from .._core import crashpoints
from .._core.crashpoints import CrashPoint
from ..errors import ContinuationDenied
from ..testing import BackendFailure

__all__ = ["LateLanding", "Mode", "Started", "cancelled_request", "describe"]

REQUEST_TIMEOUT: Final = 30.0
"""The timeout around a request (mode ``timeout``) before it is brought forward."""
LATE_DELAY: Final = 0.05
"""How long after its caller the late-landing store's write commits."""

Started = Callable[[RunResultStreaming], None]
Run = Callable[[Started | None], Awaitable[Any]]
"""Runs the request (streamed when the mode says so), handing a streamed result to the
callback before consuming its events."""


class Mode(enum.Enum):
    """How a request is cancelled."""

    TASK_CANCEL = "task.cancel"
    """``task.cancel()`` of the request's task (a server whose client disconnected)."""
    TIMEOUT = "timeout"
    """An ``asyncio.timeout`` around the request, rescheduled to now."""
    TASK_GROUP = "taskgroup"
    """A sibling in the request's ``asyncio.TaskGroup`` raises; the group cancels the run."""
    STREAM_IMMEDIATE = "stream.cancel"
    """``RunResultStreaming.cancel()`` (``mode="immediate"``)."""
    STREAM_AFTER_TURN = "stream.after_turn"
    """``RunResultStreaming.cancel(mode="after_turn")``: the turn finishes, then it stops."""

    @property
    def streamed(self) -> bool:
        return self in (Mode.STREAM_IMMEDIATE, Mode.STREAM_AFTER_TURN)


class SiblingFailed(Exception):
    """What the failing sibling of ``Mode.TASK_GROUP`` raises."""


@dataclass
class _Trigger:
    """What the armed point's action does, once the request is under way."""

    fire: Callable[[], None] | None = None
    fired: bool = False

    def __call__(self, point: CrashPoint) -> None:
        self.fired = True
        if self.fire is not None:
            self.fire()


async def _sibling(failing: asyncio.Event, run: asyncio.Future[Any]) -> None:
    waiting = asyncio.ensure_future(failing.wait())
    try:
        await asyncio.wait({waiting, run}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
    if failing.is_set():
        raise SiblingFailed("a sibling of the run failed")


def _canceller(task: asyncio.Future[Any]) -> Callable[[], None]:
    def cancel() -> None:
        task.cancel()

    return cancel


async def _coroutine(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


async def cancelled_request(
    run: Run, mode: Mode, point: CrashPoint | None, *, at: int = 1
) -> tuple[str, bool]:
    """Run one request, cancelled the ``mode`` way at the ``at``-th time ``point`` is reached
    (never, when ``point`` is None); how it ended (``describe``) and whether the cancellation
    was triggered."""
    loop = asyncio.get_running_loop()
    trigger = _Trigger()
    if point is not None:
        crashpoints.arm(point, at=at, action=trigger)
    try:
        if mode is Mode.TASK_CANCEL:
            task = asyncio.ensure_future(run(None))
            trigger.fire = _canceller(task)
        elif mode is Mode.TIMEOUT:
            scopes: list[asyncio.Timeout] = []

            async def timed() -> Any:
                async with asyncio.timeout(REQUEST_TIMEOUT) as scope:
                    scopes.append(scope)
                    return await run(None)

            trigger.fire = lambda: scopes[0].reschedule(loop.time())
            task = asyncio.ensure_future(timed())
        elif mode is Mode.TASK_GROUP:
            failing = asyncio.Event()

            async def grouped() -> Any:
                async with asyncio.TaskGroup() as group:
                    running: asyncio.Task[Any] = group.create_task(_coroutine(run(None)))
                    group.create_task(_sibling(failing, running))
                return running.result()

            trigger.fire = failing.set
            task = asyncio.ensure_future(grouped())
        else:
            results: list[RunResultStreaming] = []
            how: Literal["immediate", "after_turn"] = (
                "immediate" if mode is Mode.STREAM_IMMEDIATE else "after_turn"
            )
            trigger.fire = lambda: results[0].cancel(mode=how)
            task = asyncio.ensure_future(run(results.append))
        return await describe(task, streamed=mode.streamed), trigger.fired
    finally:
        crashpoints.disarm()


async def describe(task: asyncio.Future[Any], *, streamed: bool = False) -> str:
    """How a request ended: ``completed``, ``interrupted`` (for approval), ``stopped`` (a
    streamed run cancelled before its final output), ``cancelled``, ``timed out``, ``sibling
    failed``, ``failed`` (an injected backend failure), ``denied: <reason>`` or ``error: ...``."""
    try:
        result = await task
    except asyncio.CancelledError:
        return "cancelled"
    except TimeoutError:
        return "timed out"
    except ContinuationDenied as denied:
        reason = denied.decision.reason.value if denied.decision is not None else "?"
        return f"denied: {reason}"
    except BackendFailure:
        return "failed"
    except BaseExceptionGroup as group:
        _, rest = group.split(SiblingFailed)
        if rest is None:
            return "sibling failed"
        return f"error: {type(rest.exceptions[0]).__name__}: {rest.exceptions[0]}"
    except Exception as error:
        return f"error: {type(error).__name__}: {error}"
    if getattr(result, "interruptions", None):
        return "interrupted"
    if streamed and result.final_output is None:
        return "stopped"
    return "completed"


class LateLanding:
    """A store whose write commits ``LATE_DELAY`` after it was sent, and commits even when its
    caller is cancelled meanwhile, as a network driver's request already on the wire does (the
    SDK's SQLite sessions only do so for their worker thread's write)."""

    landing: ClassVar[set[asyncio.Future[None]]] = set()
    """Writes still on their way, in every instance."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.session_id: str = inner.session_id

    @property
    def session_settings(self) -> Any:
        return getattr(self.inner, "session_settings", None)

    async def add_items(self, items: list[Any]) -> None:
        write = asyncio.ensure_future(self._land(list(items)))
        self.landing.add(write)
        write.add_done_callback(self.landing.discard)
        await asyncio.wait({write})  # a cancelled caller does not stop the request
        write.result()

    async def _land(self, items: list[Any]) -> None:
        await asyncio.sleep(LATE_DELAY)
        await self.inner.add_items(items)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        items: list[Any] = await self.inner.get_items(limit)
        return items

    async def pop_item(self) -> Any:
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self.inner.clear_session()
