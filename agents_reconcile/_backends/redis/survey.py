"""What a Redis server or cluster holds, for an operator told there is no journal where one was
expected: the keys under a journal's prefix and the prefixes under which it holds a journal.
Only reads, with ``SCAN`` (on every primary of a cluster) over a bounded number of keys, so a
large server is never walked in full; nothing is written, not even a layout version.
"""

from __future__ import annotations

import re

from .backend import glob_escape
from .layout import KeyLayout
from .link import RedisLink
from .nodes import run_all

__all__ = ["RedisSurvey"]


class RedisSurvey:
    """The operator's look at a server or cluster, through a journal's link, for the journal
    laid out under ``prefix`` (``layout``)."""

    def __init__(self, link: RedisLink, layout: KeyLayout, prefix: str) -> None:
        self._link = link
        self._layout = layout
        self.prefix = prefix

    async def keys_held(self, *, most: int = 3, budget: int = 10_000) -> list[str]:
        """Up to ``most`` names of keys under this journal's prefix, found by ``SCAN`` over at
        most ``budget`` keys (none: the prefix holds nothing, as far as seen)."""
        found, _ = await self._link.scan(f"{glob_escape(self.prefix)}:*", most, budget)
        return [key.decode("utf-8", "backslashreplace") for key in found]

    async def journal_prefixes(
        self, *, most: int = 20, budget: int = 10_000
    ) -> tuple[list[str], bool]:
        """The prefixes under which the server holds a journal (a version key holding a
        version: ``PREFIX:schema`` on a server, a bucket's ``PREFIX:{bNNN}:schema`` on a
        cluster), found by ``SCAN`` over at most ``budget`` keys, up to ``most`` of them,
        sorted; and whether the scan saw every key."""
        buckets = self._layout.buckets()
        # How a version key ends after its prefix (any bucket's: the same length).
        suffix = buckets[0].version_key[len(self.prefix) :]
        pattern = "*" + re.sub(r"[0-9]", "[0-9]", suffix)
        # A cluster's journal has a version key per bucket: look at more to find ``most``.
        keys, complete = await self._link.scan(
            pattern, most if len(buckets) == 1 else budget, budget
        )
        with self._link.translated("journal_prefixes"):
            values = await run_all(await self._link.client(), [("GET", key) for key in keys])
        prefixes = sorted(
            {
                key[: -len(suffix)].decode("utf-8", "backslashreplace")
                for key, value in zip(keys, values, strict=True)
                if isinstance(value, bytes) and value.strip().isdigit()
            }
        )
        return prefixes[:most], complete and len(prefixes) <= most
