"""Revisioned stores: full SDK sessions that record every write with a revision and an id.

``ReconcilingSession`` detects them and judges pending writes exactly (``revision.py``).
The Redis and PostgreSQL stores need their extras: ``agents-reconcile[redis]``,
``agents-reconcile[postgres]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .memory import MemoryRevisionedSession
from .sqlite import RevisionedSQLiteSession

if TYPE_CHECKING:
    from .postgres import RevisionedPostgresSession
    from .redis import RevisionedRedisSession

__all__ = [
    "MemoryRevisionedSession",
    "RevisionedPostgresSession",
    "RevisionedRedisSession",
    "RevisionedSQLiteSession",
]


def __getattr__(name: str) -> Any:
    # The server-backed stores import their drivers only when asked for.
    if name == "RevisionedRedisSession":
        from .redis import RevisionedRedisSession

        return RevisionedRedisSession
    if name == "RevisionedPostgresSession":
        from .postgres import RevisionedPostgresSession

        return RevisionedPostgresSession
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
