"""The Redis journal's layout version: what ``RedisJournal`` checks, stores and refuses.

A step leaves only its number under ``{prefix}:schema``. ``migrate`` stores the version in an
empty journal (``backend.VersionKey``, one script) and refuses any other, before
anything touches it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final

from ...errors import JournalCorrupt
from ..lua import Send
from ..schema import Schema
from .backend import VersionKey

__all__ = ["SCHEMA", "SCHEMA_VERSION", "RedisSchemaSteps"]

SCHEMA: Final = Schema("journal", ("0001_initial",), JournalCorrupt)
"""The journal's layout steps, oldest first."""
SCHEMA_VERSION: Final = SCHEMA.version
_VERSION: Final = str(SCHEMA_VERSION).encode()


class RedisSchemaSteps:
    """The schema half of ``RedisJournal``, which provides what is declared here."""

    _version: VersionKey
    _schema_checked: bool

    if TYPE_CHECKING:

        def _translated(self, operation: str) -> AbstractContextManager[None]: ...

        async def _send(self) -> Send: ...

    async def _migrate(self, send: Send) -> list[str]:
        steps = await self._version.ensure(send, create=True)
        self._schema_checked = True
        return steps

    async def migrate(self) -> list[str]:
        """Store the schema version if the journal has none; returns the steps applied (none
        when the journal is current). Any other version, newer or unreadable, raises
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
