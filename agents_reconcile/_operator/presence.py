"""Whether a name an operator gave is there at all: a session in a journal (which knows the
sessions it holds intents, decisions, tool effects, set-aside records or counted writes of) or
in a store (which knows the sessions it holds items of). A session that is there with nothing
to report (no decision, no damage) is a finding; one that is not there is ``NotFound``, said
plainly with exit 1, as ``show`` says of an id that names nothing, never "nothing found" with
exit 0, which a mistyped name would pass for.

The counted writes are read by session from each engine of this package (SQLite, PostgreSQL,
Redis, Redis Cluster) as its schema lays them out; a journal of another kind, whose counts can
only be read with a backend identity the command does not know, is never said to lack a
session (``journal_holds`` answers None)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._backends.rows import collecting_damage
from ..errors import ReconcileError

if TYPE_CHECKING:
    from .._backends.journal import IntentJournal

__all__ = ["NotFound", "journal_holds"]


class NotFound(ReconcileError):
    """Nothing by the name a command was given is where it looked: no intent, tool effect or
    set-aside record by an id in the journal, no session in the journal or in the store.
    Nothing was written. ``what`` (``id``, ``session``) and ``name`` say what was looked for."""

    def __init__(self, message: str, *, what: str, name: str) -> None:
        super().__init__(message)
        self.what = what
        self.name = name


async def journal_holds(journal: IntentJournal, session_id: str, address: str | None) -> str | None:
    """What the journal (at ``address``) holds of ``session_id``, as words (``pending intents``,
    ``decisions``, ``tool effects``, ``set-aside records``, ``counted writes``); ``""`` when it
    holds nothing of it; None when it cannot tell (a journal whose counted writes cannot be
    read by session here). A row that cannot be read (damaged, sealed) counts as held."""
    with collecting_damage() as damaged:
        if await journal.pending(session_id):
            return "pending intents"
        if await journal.decisions(session_id=session_id, limit=1):
            return "decisions"
        if journal.effects is not None and await journal.effects.of_session(session_id):
            return "tool effects"
    if damaged:
        return "records that cannot be read here"
    if journal.aside is not None and await journal.aside.entries(session_id=session_id, limit=1):
        return "set-aside records"
    counted = await _counted(journal, session_id, address)
    if counted is None:
        return None
    return "counted writes" if counted else ""


async def _counted(journal: Any, session_id: str, address: str | None) -> bool | None:
    """Whether the journal counts writes of ``session_id`` under any backend (None: it cannot
    be read by session here)."""
    from .._backends.sqlite.journal import SQLiteJournal

    if isinstance(journal, SQLiteJournal):
        return await _counted_in_file(journal, session_id)
    if address is None:
        return None
    from .server_reads import served_by

    served = served_by(address)
    schema = getattr(journal, "schema", None)
    if served == "postgres" and isinstance(schema, str):
        from .._backends.postgres.backend import quote
        from .server_reads import postgres_rows

        statement = f"SELECT 1 FROM {quote(schema)}.session_writes WHERE session_id = $1 LIMIT 1"
        return bool(await postgres_rows(address, schema, statement, session_id))
    prefix = getattr(journal, "prefix", None)
    if served in ("redis", "redis-cluster") and isinstance(prefix, str):
        from .._backends.redis.layout import COUNTS, SESSION_KEYS, JournalKeys
        from .server_reads import redis_exists

        if served == "redis-cluster":
            from .._backends.redis.cluster.layout import BucketKeys

            layout: JournalKeys = BucketKeys(prefix)
        else:
            layout = JournalKeys(prefix)
        keys = layout.of(session_id).session(session_id)
        return await redis_exists(address, keys[SESSION_KEYS.index(COUNTS)])
    return None


async def _counted_in_file(journal: Any, session_id: str) -> bool:
    from .._backends.sqlite.files import JournalFile

    # A reader of its own, which leaves nothing beside the file, as the journal's does.
    reader = JournalFile(journal.path, busy_timeout=5.0, synchronous="NORMAL", read_only=True)
    try:
        row = await reader.run(
            lambda conn: conn.execute(
                "SELECT 1 FROM session_writes WHERE session_id = ? LIMIT 1", (session_id,)
            ).fetchone()
        )
    finally:
        reader.close()
    return row is not None
