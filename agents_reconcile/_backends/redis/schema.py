"""The Redis journal's layout version: what ``RedisJournal`` checks, stores, upgrades and
refuses.

A step leaves only its number under ``{prefix}:schema``, and what it needs of the data that
is there: step 2 (``0002_retention``: counts stamped when raised, a floor for pruned ones)
keeps the time of the upgrade under ``{prefix}:upgraded``, which stands for the stamp of
every count raised before it; step 3 (``0003_listing``: unresolved intents listed in byte
order, so that a page of them costs the same however many there are) puts every intent of the
index in ``{prefix}:listing``, in the one script. ``migrate`` and the first use of a journal
object (a read checks first; a writing script refused for an older version has the journal
upgraded and runs again, having run nothing) store the version in an empty journal and upgrade
an older one, in one script (``scripts/migrate.lua``); any other version is refused, before
anything touches it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final

from redis.exceptions import ResponseError

from ...errors import JournalCorrupt
from ..lua import LuaScript, Send
from ..schema import Schema
from . import replies
from .backend import VersionKey
from .layout import LISTING, UPGRADED, JournalKeys

__all__ = ["SCHEMA", "SCHEMA_VERSION", "RedisSchemaSteps", "migrate_keys"]

SCHEMA: Final = Schema(
    "journal", ("0001_initial", "0002_retention", "0003_listing"), JournalCorrupt
)
"""The journal's layout steps, oldest first."""
SCHEMA_VERSION: Final = SCHEMA.version
_VERSION: Final = str(SCHEMA_VERSION).encode()
_MIGRATE: Final = LuaScript("agents_reconcile._backends.redis", "scripts", "migrate")


def migrate_keys(layout: JournalKeys) -> list[str]:
    """``migrate.lua``'s keys in ``layout``: the version, the upgrade time, the index, the
    listing."""
    names = layout.names
    return [layout.version_key, names[UPGRADED], names["index"], names[LISTING]]


def _older_refused(error: Exception) -> bool:
    """Whether ``error`` is a writing script's refusal of an older layout version (one this
    release upgrades: the script ran nothing)."""
    text = str(error)
    if replies.SCHEMA_REFUSAL not in text:
        return False
    found = text.split(replies.SCHEMA_REFUSAL, 1)[1].strip()
    return found.isdigit() and 0 < int(found) < SCHEMA_VERSION


class RedisSchemaSteps:
    """The schema half of ``RedisJournal``, which provides what is declared here."""

    _layout: JournalKeys
    _version: VersionKey
    _schema_checked: bool

    if TYPE_CHECKING:

        def _translated(self, operation: str) -> AbstractContextManager[None]: ...

        async def _send(self) -> Send: ...

    async def _migrate(self, send: Send) -> list[str]:
        keys = migrate_keys(self._layout)
        reply = await _MIGRATE.run(send, keys, [str(SCHEMA_VERSION)])
        word, parts = replies.status(reply, "migrate")
        if word == "created" and len(parts) == 1:
            found = 0
        elif word in ("upgraded", "found") and len(parts) == 2:
            found = self._version.parse(parts[1])
            if word == "found":
                SCHEMA.refuse(self._version.where, found)
        else:
            raise SCHEMA.unreadable(f"{self._version.where}: {self._version.key}", reply)
        self._schema_checked = True
        return [SCHEMA.applied(number) for number in range(found + 1, SCHEMA_VERSION + 1)]

    async def _refused(self, error: ResponseError, client: Any) -> None:
        """After a script answered ``error``: a writing script refuses a journal of an older
        layout before it runs anything, so the journal is upgraded then, as on first use, for
        the script to be sent again; any other error is raised as it is."""
        if not _older_refused(error):
            raise error
        await self._migrate(client.execute_command)

    async def migrate(self) -> list[str]:
        """Store the schema version if the journal has none, or upgrade an older one; returns
        the steps applied (none when the journal is current). Any other version, newer or
        unreadable, raises ``JournalCorrupt`` and is left as it is."""
        with self._translated("migrate"):
            return await self._migrate(await self._send())

    async def check(self) -> str | None:
        """None when the journal's schema is current, else a sentence saying what is missing
        or wrong. Only reads."""
        with self._translated("check"):
            return await self._version.problem(await self._send())

    async def schema_version(self) -> int | None:
        """The version stored (None when the journal holds none); only reads."""
        with self._translated("schema_version"):
            return await self._version.read(await self._send())
