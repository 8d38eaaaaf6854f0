"""The cluster journal's layout version, kept in every bucket (``{bNNN}:schema``): a bucket gets
it with its first write (every writing script stores it when absent, as on one server) and
``migrate`` gives it to them all. ``check`` and ``schema_version`` read every bucket's at once
and report the worst (unreadable, then newer, then the oldest); a bucket without one holds
nothing yet. The first use of a journal object reads them all, and stores the version where it
is missing, once none is newer or unreadable (nothing is written to a journal a newer release
laid out).

Also what an operator looks for on a cluster (``survey.py``): keys under the journal's prefix
and the prefixes of journals, by ``SCAN`` on every primary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..backend import VersionKey, glob_escape
from ..nodes import each_primary, run_all, scan, scripts_all
from ..schema import _MIGRATE, SCHEMA, SCHEMA_VERSION, migrate_keys
from .io import ClusterIO
from .layout import BUCKETS, BucketKeys

if TYPE_CHECKING:
    from ...lua import Send

__all__ = ["ClusterSchema"]

_SCAN_STEP: Final = 1000
_SCHEMA_SUFFIX: Final = ":{b000}:schema"
"""How a bucket's version key ends (any bucket number: the same length)."""


class ClusterSchema(ClusterIO):
    """``migrate``, ``check`` and ``schema_version`` of ``RedisClusterJournal``, and its
    ``_migrate`` (the first use), which it provides what is declared here for."""

    prefix: str
    _layout: BucketKeys
    _version: VersionKey
    _schema_checked: bool

    async def _found(self) -> list[int | None]:
        """Every bucket's version (None where absent), bucket 0 first; unreadable raises."""
        client = await self._cluster()
        keys = [self._layout.bucket(number).version_key for number in range(BUCKETS)]
        raw = await run_all(client, [("GET", key) for key in keys])
        return [
            None if value is None else VersionKey(key, SCHEMA, self._version.where).parse(value)
            for key, value in zip(keys, raw, strict=True)
        ]

    async def _migrate(self, send: Send) -> list[str]:
        found = await self._found()
        present = [version for version in found if version is not None]
        if any(version > SCHEMA_VERSION for version in present):
            SCHEMA.refuse(self._version.where, max(present))
        lowest = min(present, default=0) if len(present) == BUCKETS else 0
        calls = [
            (_MIGRATE, migrate_keys(bucket), [str(SCHEMA_VERSION)])
            for number, bucket in enumerate(self._layout.all())
            if found[number] != SCHEMA_VERSION
        ]
        if calls:
            await scripts_all(await self._cluster(), calls)
        self._schema_checked = True
        return [SCHEMA.applied(number) for number in range(lowest + 1, SCHEMA_VERSION + 1)]

    async def migrate(self) -> list[str]:
        """Store the schema version in every bucket that has none (or an older one); returns
        the steps applied (none when every bucket is current). A newer or unreadable version in
        any bucket raises ``JournalCorrupt``, and nothing is written."""
        with self._translated("migrate"):
            return await self._migrate((await self._cluster()).execute_command)

    async def check(self) -> str | None:
        """None when every bucket holding a version holds this release's (and one does), else
        a sentence saying what is wrong. Only reads."""
        with self._translated("check"):
            try:
                found = await self._found()
            except SCHEMA.error as exc:
                return str(exc)
        present = [version for version in found if version is not None]
        newer = [version for version in present if version > SCHEMA_VERSION]
        worst = max(newer) if newer else min(present, default=None)
        return SCHEMA.problem(self._version.where, worst)

    async def schema_version(self) -> int | None:
        """The oldest version a bucket holds (None when none holds one); only reads."""
        with self._translated("schema_version"):
            present = [version for version in await self._found() if version is not None]
        return min(present, default=None)

    # -- an operator's look ----------------------------------------------------------------

    async def keys_held(self, *, most: int = 3, budget: int = 10_000) -> list[str]:
        """Up to ``most`` names of keys under this journal's prefix, found by ``SCAN`` over at
        most ``budget`` keys of the primaries."""
        found, _ = await self._scan_primaries(f"{glob_escape(self.prefix)}:*", most, budget)
        return [key.decode("utf-8", "backslashreplace") for key in found]

    async def journal_prefixes(
        self, *, most: int = 20, budget: int = 10_000
    ) -> tuple[list[str], bool]:
        """The prefixes under which the cluster holds a journal (a bucket's version key holding
        a version), found by ``SCAN`` over at most ``budget`` keys, up to ``most``, sorted; and
        whether the scan saw every key of every primary."""
        keys, complete = await self._scan_primaries("*:{b[0-9][0-9][0-9]}:schema", budget, budget)
        with self._translated("journal_prefixes"):
            values = await run_all(await self._cluster(), [("GET", key) for key in keys])
        prefixes = sorted(
            {
                key[: -len(_SCHEMA_SUFFIX)].decode("utf-8", "backslashreplace")
                for key, value in zip(keys, values, strict=True)
                if isinstance(value, bytes) and value.strip().isdigit()
            }
        )
        return prefixes[:most], complete and len(prefixes) <= most

    async def _scan_primaries(
        self, pattern: str, most: int, budget: int
    ) -> tuple[list[bytes], bool]:
        found: list[bytes] = []
        with self._translated("scan"):
            client = await self._cluster()
            primaries = await each_primary(client)
            share = max(_SCAN_STEP, budget // max(1, len(primaries)))
            complete = True
            for node in primaries:
                cursor, seen = 0, 0
                while True:
                    cursor, keys = await scan(client, node, cursor, pattern, _SCAN_STEP)
                    found.extend(key for key in keys if key not in found)
                    seen += _SCAN_STEP
                    if cursor == 0:
                        break
                    if seen >= share or len(found) >= most:
                        complete = False
                        break
                if len(found) >= most:
                    break
        return found[:most], complete and len(found) <= most
