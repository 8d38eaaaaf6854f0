"""The Redis journal's layout versions: what ``RedisJournal`` checks, stores and raises.

Each step leaves only its number under ``{prefix}:schema`` and adds keys without rewriting any
(``0002_effects``: the effect keys). ``migrate.lua`` stores the version in an empty journal,
raises an older one in place, and reports a newer one, which is refused before anything
touches it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final

from ..backends.lua import LuaScript, Send
from ..backends.redis import VersionKey
from ..backends.schema import Schema
from ..errors import JournalCorrupt
from . import redis_replies as replies
from .redis_layout import JournalKeys

__all__ = ["SCHEMA", "SCHEMA_VERSION", "RedisSchemaSteps"]

SCHEMA: Final = Schema("journal", ("0001_initial", "0002_effects"), JournalCorrupt)
"""The journal's layout steps, oldest first."""
SCHEMA_VERSION: Final = SCHEMA.version
_VERSION: Final = str(SCHEMA_VERSION).encode()
_MIGRATE: Final = LuaScript("agents_reconcile.journal", "redis_scripts", "migrate", prelude=True)


class RedisSchemaSteps:
    """The schema half of ``RedisJournal``, which provides what is declared here."""

    _layout: JournalKeys
    _version: VersionKey
    _where: str
    _schema_checked: bool

    if TYPE_CHECKING:

        def _translated(self, operation: str) -> AbstractContextManager[None]: ...

        async def _send(self) -> Send: ...

    def _older(self, found: bytes | None) -> bool:
        """Whether a refused write found a version older than this release's."""
        if found is None:
            return False
        try:
            return self._version.parse(found) < SCHEMA_VERSION
        except JournalCorrupt:
            return False

    async def _migrate(self, send: Send) -> list[str]:
        reply = await _MIGRATE.run(send, self._layout.globals, [_VERSION])
        word, parts = replies.status(reply, "migrate")
        if word == "created" and len(parts) == 1:
            found = 0
        elif word == "current" and len(parts) == 1:
            found = SCHEMA_VERSION
        elif word in ("upgraded", "found") and len(parts) == 2:
            found = self._version.parse(parts[1])
            if word == "found":
                SCHEMA.refuse(self._where, found)  # newer: left as it is
        else:
            raise SCHEMA.unreadable(f"{self._where}: {self._version.key}", reply)
        self._schema_checked = True
        return [SCHEMA.applied(number) for number in range(found + 1, SCHEMA_VERSION + 1)]

    async def migrate(self) -> list[str]:
        """Store the schema version if the journal has none, or raise an older one to this
        release's (a step adds keys and rewrites nothing); returns the steps applied (none
        when the journal is current). A newer or unreadable version raises
        ``JournalCorrupt`` and is left as it is."""
        with self._translated("migrate"):
            return await self._migrate(await self._send())

    async def check(self) -> str | None:
        """None when the journal's schema is current, else a sentence saying what is missing
        or wrong. Only reads."""
        with self._translated("check"):
            return await self._version.problem(await self._send())

    async def schema_version(self) -> int | None:
        """The schema version stored (None when the journal holds none); only reads."""
        with self._translated("schema_version"):
            return await self._version.read(await self._send())
