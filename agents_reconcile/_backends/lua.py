"""Lua scripts shipped with the package, run on Redis as one command each.

A script goes out by its SHA1 (``EVALSHA``); a server that does not know it (restarted,
``SCRIPT FLUSH``ed, another server behind a failover) answers ``NOSCRIPT`` having run nothing,
and the script goes out again by its source (``EVAL``, which also caches it there): never
a separate ``SCRIPT LOAD``. ``send_once`` sends a command outside the client's retries, for
scripts that must not run twice when a reply is lost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import cached_property
from hashlib import sha1
from importlib import resources
from typing import Any

from ..errors import ConfigurationError
from .redis.replicas import ReplicaWait, waited

try:
    from redis.asyncio import Redis
    from redis.exceptions import NoScriptError, ResponseError
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ConfigurationError(
        "the Redis backends need redis-py: pip install 'agents-reconcile[redis]'"
    ) from exc

__all__ = ["LuaScript", "Send", "send_once"]

Send = Callable[..., Awaitable[Any]]
"""Sends one command and returns its reply: a client's ``execute_command``, or ``send_once``
bound to a client."""


class LuaScript:
    """``<package>/<folder>/<name>.lua``, with ``prelude.lua`` of the same folder in front of
    it when ``prelude`` is set."""

    def __init__(self, package: str, folder: str, name: str, *, prelude: bool = False) -> None:
        self.package, self.folder, self.name, self.prelude = package, folder, name, prelude

    @cached_property
    def source(self) -> str:
        folder = resources.files(self.package).joinpath(self.folder)
        try:
            body = folder.joinpath(f"{self.name}.lua").read_text(encoding="utf-8")
            if self.prelude:
                body = folder.joinpath("prelude.lua").read_text(encoding="utf-8") + "\n" + body
        except OSError as exc:
            raise ConfigurationError(
                f"the Redis script {self.name}.lua is missing from the installed package"
            ) from exc
        return body

    @cached_property
    def sha(self) -> str:
        return sha1(self.source.encode("utf-8"), usedforsecurity=False).hexdigest()

    async def run(self, send: Send, keys: Sequence[str | bytes], args: Sequence[Any]) -> Any:
        """The script's reply: by ``EVALSHA``, or by ``EVAL`` when the server lacks it."""
        try:
            return await send("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await send("EVAL", self.source, len(keys), *keys, *args)


async def send_once(client: Redis, *args: Any, wait: ReplicaWait | None = None) -> Any:
    """Send one command on a connection of ``client``'s pool, without the client's retries;
    with ``wait``, a ``WAIT`` for replicas follows it on the same connection (``replicas``).

    A connection the server dropped while idle is replaced before sending (the pool checks
    it); an error after sending leaves the command's fate unknown and is raised as it is.
    """
    pool: Any = client.connection_pool  # its methods are untyped
    connection = await pool.get_connection()
    try:
        await connection.send_command(*args)
        reply = await connection.read_response()
        if wait is not None:
            await waited(connection, wait)
        return reply
    except ResponseError:
        raise  # the server answered: the connection is in a clean state
    except BaseException:
        await connection.disconnect(nowait=True)
        raise
    finally:
        await pool.release(connection)
