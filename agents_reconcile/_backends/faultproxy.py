"""``FaultProxy``: a loopback TCP proxy that loses a server's reply, for tests against real
Redis or PostgreSQL servers.

Point a client at ``proxy.address`` instead of the server. Normally bytes pass both ways.
After ``lose_next_reply()``, the next request from a client reaches the server, but the
server's answer does not reach the client: the proxy waits for it (so the server has done the
work), runs an optional hook (for instance: kill the server), then closes that client's
connection. The client sees its connection dropped after its write, exactly the uncertain
outcome this package exists for. ``refuse_next_request()`` drops the connection instead of
forwarding the request (the write never reaches the server).

It binds to 127.0.0.1 only and serves until ``close()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Awaitable, Callable

__all__ = ["FaultProxy"]

_CHUNK = 65536


class _Plan(enum.Enum):
    PASS = "pass"
    LOSE_REPLY = "lose_reply"
    REFUSE_REQUEST = "refuse_request"


class FaultProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target_host:target_port``, losing what it is told to."""

    def __init__(self, target_host: str, target_port: int) -> None:
        if target_host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("FaultProxy forwards to loopback servers only")
        self._target = (target_host, target_port)
        self._server: asyncio.AbstractServer | None = None
        self._plan = _Plan.PASS
        self._hook: Callable[[], Awaitable[None]] | None = None
        self._fired = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.lost_replies = 0
        self.refused_requests = 0

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def lose_next_reply(self, hook: Callable[[], Awaitable[None]] | None = None) -> None:
        """The next request goes through; its reply is swallowed, ``hook`` runs, and the
        client's connection is closed."""
        self._plan, self._hook = _Plan.LOSE_REPLY, hook
        self._fired.clear()

    def refuse_next_request(self) -> None:
        """The next request is not forwarded; the client's connection is closed."""
        self._plan, self._hook = _Plan.REFUSE_REQUEST, None
        self._fired.clear()

    async def fired(self) -> None:
        """Wait until the planned loss has happened (bound it with ``asyncio.timeout``)."""
        await self._fired.wait()

    def _take_plan(self) -> tuple[_Plan, Callable[[], Awaitable[None]] | None]:
        plan, hook = self._plan, self._hook
        self._plan, self._hook = _Plan.PASS, None
        return plan, hook

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            server_r, server_w = await asyncio.open_connection(*self._target)
        except OSError:
            client_w.close()
            self._tasks.discard(task)
            return
        lose = asyncio.Event()
        hook_box: list[Callable[[], Awaitable[None]] | None] = [None]

        async def upstream() -> None:
            while data := await client_r.read(_CHUNK):
                if self._plan is not _Plan.PASS and not lose.is_set():
                    plan, hook = self._take_plan()
                    if plan is _Plan.REFUSE_REQUEST:
                        self.refused_requests += 1
                        self._fired.set()
                        return
                    hook_box[0] = hook
                    lose.set()
                server_w.write(data)
                await server_w.drain()

        async def downstream() -> None:
            while data := await server_r.read(_CHUNK):
                if lose.is_set():
                    # The server answered: its work is done. The client never hears of it.
                    self.lost_replies += 1
                    hook = hook_box[0]
                    if hook is not None:
                        await hook()
                    self._fired.set()
                    return
                client_w.write(data)
                await client_w.drain()

        pumps = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            for writer in (client_w, server_w):
                writer.close()
            for pump in pumps:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pump
            self._tasks.discard(task)
