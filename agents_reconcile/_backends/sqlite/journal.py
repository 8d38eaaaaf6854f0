"""The embedded journal: one SQLite file, no setup.

Each operation is one short transaction on a connection owned by this object. It runs on
the calling thread while the database is free (a few tens of microseconds, cheaper than a
thread hop) and moves to a worker thread with a longer busy timeout when another process
holds the write lock, so a busy journal never stalls the event loop for long.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Final

from ..._core.ownership import Owner
from ..._core.records import BackendIdentity, Decision, PendingWrite
from ..._core.sealing import Keyring
from ...errors import IntentConflict, LeaseLost
from ..journal import (
    Capabilities,
    IntentState,
    JournalEntry,
    Opened,
    require_limit,
    require_settling,
)
from ..rows import checked_decision, checked_entry, each
from .aside import SQLiteAside
from .backend import path_of
from .effects import SQLiteEffects
from .files import FLOOR, SCHEMA, SCHEMA_VERSION, JournalFile
from .pages import SQLitePages
from .retention import SQLiteRetention
from .sealing import SQLiteSealing
from .statements import (
    SETTLING_ACTIONS,
    add_write,
    clear_live,
    insert_decision,
    matching,
    newest_by_intent,
    read_count,
    read_newest,
    remove_intent,
    settled,
    settled_by,
)

__all__ = ["SCHEMA", "SCHEMA_VERSION", "SQLiteJournal"]

# One journal object per file within a process: every spelling of an address shares it.
_SHARED: dict[Path, SQLiteJournal] = {}


class SQLiteJournal:
    """``IntentJournal`` in one SQLite file (created with its schema on first use), with every
    component built on it.

    ``synchronous="NORMAL"`` (the default) makes every commit survive the process being
    killed; ``"FULL"`` also survives power loss, at an fsync per commit. ``read_only=True``
    opens an existing journal for inspection: it never creates, migrates or writes the file.
    """

    # Its calls run on the event loop (in a thread only while another process holds the
    # file's lock), so it starts eagerly; it clears in the opening's own commit.
    capabilities: ClassVar[Capabilities] = Capabilities(
        folds_clearing=True,
        starts_eagerly=True,
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 5.0,
        synchronous: str = "NORMAL",
        read_only: bool = False,
    ) -> None:
        self._file = JournalFile(
            path, busy_timeout=busy_timeout, synchronous=synchronous, read_only=read_only
        )
        self.path = self._file.path
        self.read_only = read_only
        self.keyring = Keyring()
        """The keys that open sealed batches: those of every wrapper using this journal."""
        self.effects = SQLiteEffects(self._file, self.keyring)
        """Tools' external effects (``JournalEffects``)."""
        self.aside = SQLiteAside(self._file)
        """Damaged intents set aside (``JournalAside``)."""
        self.pages = SQLitePages(self._file, self.keyring)
        """Its listings a page at a time (``JournalPages``)."""
        self.retention = SQLiteRetention(self._file)
        """Pruning what the retention lets go (``JournalRetention``)."""
        self.sealing = SQLiteSealing(self._file)
        """The mark of a sealed journal (``JournalSealing``)."""

    @classmethod
    def from_address(cls, address: str, *, namespace: str | None = None) -> SQLiteJournal:
        """The journal of the file ``address`` names (a path or an ``sqlite:`` URL), shared
        by every caller in this process; ``namespace`` is not used (the file is one)."""
        key = path_of(address).expanduser().resolve()
        journal = _SHARED.get(key)
        if journal is None:
            journal = _SHARED[key] = cls(key)
        return journal

    def __repr__(self) -> str:
        return f"SQLiteJournal({str(self.path)!r})"

    # -- schema ---------------------------------------------------------------------------

    async def schema_version(self) -> int | None:
        """The schema version recorded in the file (None without one); writes nothing."""
        return await self._file.schema_version()

    async def migrate(self) -> list[str]:
        """Create or upgrade the schema; return the steps applied (none when current)."""
        return await self._file.migrate()

    async def check(self) -> str | None:
        """None when the file holds this release's schema; else what is missing or newer,
        what stops this user reading it, or what the file holds instead of a journal.
        Creates and writes nothing, and leaves no file beside the journal."""
        return await self._file.check()

    # -- IntentJournal ------------------------------------------------------------------

    async def write_count(self, session_id: str, backend: BackendIdentity) -> int:
        await self._file.refuse_older()
        return await self._file.run(lambda conn: read_count(conn, (session_id, str(backend))))

    async def count_write(self, session_id: str, backend: BackendIdentity) -> int:
        return await self._file.run(lambda conn: add_write(conn, (session_id, str(backend))))

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Owner) -> None:
        blob = intent.encode()
        row = _intent_row(intent, state, owner, blob)

        def write(conn: sqlite3.Connection) -> None:
            # IMMEDIATE: the settled check and the insert must see one state of the file.
            conn.execute("BEGIN IMMEDIATE")
            if settled(conn, intent.intent_id):
                raise IntentConflict(
                    f"intent {intent.intent_id} was already settled", intent_id=intent.intent_id
                )
            _insert_or_compare(conn, intent, row, self.keyring)
            conn.execute("COMMIT")

        await self._file.run(write)

    async def open_intent(
        self,
        intent: PendingWrite,
        *,
        state: IntentState,
        owner: Owner,
        expect_write_count: int | None = None,
        clearing: str | None = None,
    ) -> Opened:
        blob = intent.encode()
        row = _intent_row(intent, state, owner, blob)
        key = (intent.session_id, str(intent.backend))

        def write(conn: sqlite3.Connection) -> Opened:
            # One statement, so one atomic step: the session's live row takes the intent
            # (replacing the acknowledged one ``clearing`` names) only when nothing else is
            # unresolved for it, the id was never settled and, when a count is expected, the
            # count is still that one; it returns the count it saw.
            try:
                opened = conn.execute(
                    _OPEN_LIVE_SQL,
                    (
                        intent.intent_id,
                        *row[3:],
                        row[6],
                        *key,
                        clearing,
                        IntentState.IN_FLIGHT.value,
                        str(owner),
                        expect_write_count,
                        *key,
                        intent.intent_id,
                        intent.intent_id,
                        *SETTLING_ACTIONS,
                    ),
                ).fetchone()
            except sqlite3.IntegrityError:
                opened = None  # the id is live in another session
            if opened is not None:
                return Opened(recorded=True, write_count=int(opened[0]))
            # Refused, or the session has no live row yet, or the id is taken (perhaps by this
            # very intent, opened by a call whose reply was lost): find out which under the
            # write lock, clearing first, and open if, by now, nothing is in the way.
            conn.execute("BEGIN IMMEDIATE")
            if clearing is not None:
                remove_intent(
                    conn,
                    clearing,
                    only_if=" AND session_id = ? AND backend = ? AND state = ? AND owner = ?",
                    args=(*key, IntentState.IN_FLIGHT.value, str(owner)),
                )
            opened_locked = _open_locked(
                conn, intent, state, owner, expect_write_count, row, self.keyring
            )
            conn.execute("COMMIT")
            return opened_locked

        return await self._file.run(write)

    async def transition(
        self,
        intent_id: str,
        *,
        state: IntentState,
        owner: Owner,
        expect_state: IntentState | None = None,
        expect_owner: Owner | None = None,
        expect_fence: int | None = None,
        expect_updated_at: float | None = None,
    ) -> bool:
        sets = "state = ?, owner = ?, updated_at = ?"
        args: list[object] = [state.value, str(owner), time.time(), intent_id]
        where = " WHERE intent_id = ?" + matching(
            args,
            state=None if expect_state is None else expect_state.value,
            owner=None if expect_owner is None else str(expect_owner),
            fence=expect_fence,
            updated_at=expect_updated_at,
        )
        claims = state is IntentState.RECONCILING and expect_fence is None
        # A claim takes a new fencing token in the same statement: above the last it took,
        # and at least the session's count.
        live = f"UPDATE live SET {sets}" + (
            ", fence = max(fence + 1, write_count)" if claims else ""
        )
        beside = f"UPDATE intents SET {sets}" + (
            ", fence = max(fence + 1, coalesce((SELECT write_count FROM live AS w"
            " WHERE w.session_id = intents.session_id AND w.backend = intents.backend),"
            f" {FLOOR}))"
            if claims
            else ""
        )

        def write(conn: sqlite3.Connection) -> bool:
            # A live intent stays live and one beside stays beside: whichever table holds the
            # id, the other has no row of it.
            if conn.execute(live + where, args).rowcount == 1:
                return True
            return bool(conn.execute(beside + where, args).rowcount == 1)

        return await self._file.run(write)

    async def discard(
        self, intent_id: str, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        held = (IntentState.IN_FLIGHT.value, None if owner is None else str(owner))
        only_if = " AND state = ? AND owner = ?" + ("" if fence is None else " AND fence = ?")
        args = held if fence is None else (*held, fence)

        def write(conn: sqlite3.Connection) -> None:
            if owner is not None and clear_live(conn, intent_id, only_if=only_if, args=args):
                # Its holder's live intent (an acknowledged append's, cleared in the
                # background): one statement, the count moved in it.
                return
            # IMMEDIATE: the intent goes and its session's count moves in one step, so no
            # reader sees the write landed with the count it had while it was in flight.
            conn.execute("BEGIN IMMEDIATE")
            if owner is not None:
                _require_held(conn, intent_id, IntentState.IN_FLIGHT, owner, fence)
            removed = remove_intent(conn, intent_id)
            if not removed and owner is not None and settled(conn, intent_id):
                # Gone because another took it over and settled it meanwhile (gone unsettled,
                # it was discarded already: a retry): never this owner's to clear.
                raise LeaseLost(
                    f"intent {intent_id} was settled; {owner} no longer holds it",
                    intent_id=intent_id,
                )
            conn.execute("COMMIT")

        await self._file.run(write)

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        def read(conn: sqlite3.Connection) -> list[_Row]:
            args: list[object] = []
            sql = _SELECT_INTENTS + " WHERE 1 = 1"
            sql += matching(
                args, session_id=session_id, backend=None if backend is None else str(backend)
            )
            rows: list[_Row] = conn.execute(sql + " ORDER BY created_at", args).fetchall()
            return rows

        keyring = self.keyring
        return each(
            await self._file.run(read),
            lambda row: _entry(*row, keyring=keyring),
            lambda row: ("intent", row[0], row[1]),
        )

    async def get(self, intent_id: str) -> JournalEntry | None:
        row = await self._file.run(
            lambda conn: conn.execute(
                _SELECT_INTENTS + " WHERE intent_id = ?", (intent_id,)
            ).fetchone()
        )
        return None if row is None else _entry(*row, keyring=self.keyring)

    async def is_settled(self, intent_id: str) -> bool:
        return await self._file.run(lambda conn: settled(conn, intent_id))

    async def settle(
        self, decision: Decision, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        require_settling(decision, settling=True)
        intent_id = decision.intent_id

        def write(conn: sqlite3.Connection) -> None:
            # IMMEDIATE: the claim check and the delete must see one state of the file.
            conn.execute("BEGIN IMMEDIATE")
            if settled(conn, intent_id):
                if settled_by(conn, decision):
                    # The same call again, its first reply lost: already done.
                    return
                raise IntentConflict(f"intent {intent_id} was already settled", intent_id=intent_id)
            if owner is not None:
                _require_held(conn, intent_id, IntentState.RECONCILING, owner, fence)
            # Counted whatever the action: a batch that landed through a replay whose reply was
            # lost settles as committed, and other wrappers' memories must expire either way.
            if not remove_intent(conn, intent_id):
                add_write(conn, (decision.session_id, str(decision.backend)))
            insert_decision(conn, decision)
            conn.execute("COMMIT")

        await self._file.run(write)

    async def note(self, decision: Decision) -> None:
        require_settling(decision, settling=False)
        await self._file.run(lambda conn: insert_decision(conn, decision))

    async def note_again(self, previous: Decision, again: Decision) -> bool:
        """Replace the newest decision about ``previous``'s intent with ``again`` (the same
        decision, counted once more), only while it is still ``previous``; whether it was."""
        require_settling(again, settling=False)
        sql = (
            "UPDATE decisions SET record = ? WHERE record = ? AND seq ="
            " (SELECT max(seq) FROM decisions WHERE intent_id = ?)"
        )
        args = (again.encode(), previous.encode(), previous.intent_id)
        return bool(await self._file.run(lambda conn: conn.execute(sql, args).rowcount == 1))

    async def decisions(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[Decision]:
        args: list[object] = []
        sql = "SELECT intent_id, session_id, record FROM decisions WHERE 1 = 1"
        sql += matching(args, session_id=session_id, intent_id=intent_id)
        require_limit(limit)
        sql += " ORDER BY seq DESC LIMIT ?"
        args.append(limit)
        rows = await self._file.run(lambda conn: conn.execute(sql, args).fetchall())
        return each(rows, lambda row: _decision(*row), lambda row: ("decision", row[0], row[1]))

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        ids = list(dict.fromkeys(intent_ids))
        rows = await self._file.run(lambda conn: read_newest(conn, ids)) if ids else []
        return newest_by_intent(rows)

    async def close(self) -> None:
        """Close the connection. The journal is shared per file within a process, so a later
        operation (by this or another session) opens a new one instead of failing."""
        self._file.close()


# Puts the intent in its session's live row only when the row has none, or has the
# acknowledged intent ``clearing`` names (in flight, under this owner), nothing is recorded
# beside it, the id is neither recorded beside nor settled and, when a count is expected, the
# count (after the clearing) is still that one. The count moves for the clearing and for the
# opening, and the intent's token is the count it saw. Parameters: the intent's id, state,
# owner, creation and update times, record, the time counted; the session key, the id to
# clear, its state and owner, the expected count (NULL for none); the session key; the id
# twice and the settling actions.
_OPEN_LIVE_SQL: Final = (
    "UPDATE live SET intent_id = ?, state = ?, owner = ?, created_at = ?, updated_at = ?,"
    " record = ?, counted_at = ?, fence = write_count + (intent_id IS NOT NULL),"
    " write_count = write_count + (intent_id IS NOT NULL) + 1"
    " WHERE session_id = ? AND backend = ?"
    " AND (intent_id IS NULL OR (intent_id = ? AND state = ? AND owner = ?))"
    " AND coalesce(?, write_count + (intent_id IS NOT NULL))"
    " = write_count + (intent_id IS NOT NULL)"
    " AND NOT EXISTS (SELECT 1 FROM intents WHERE session_id = ? AND backend = ?)"
    " AND NOT EXISTS (SELECT 1 FROM intents WHERE intent_id = ?)"
    " AND NOT EXISTS (SELECT 1 FROM decisions WHERE intent_id = ? AND action IN (?, ?, ?))"
    " RETURNING fence"
)
_INSERT_INTENT_SQL: Final = (
    "INSERT INTO intents (intent_id, session_id, backend, state, owner, created_at, updated_at,"
    " record, fence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
"""An intent recorded beside its session's live one."""
_SELECT_INTENTS: Final = (
    "SELECT intent_id, session_id, backend, state, owner, updated_at, record, fence FROM unresolved"
)
_Row = tuple[str, str, str, str, str, float, bytes, int]


def _require_held(
    conn: sqlite3.Connection, intent_id: str, state: IntentState, owner: Owner, fence: int | None
) -> None:
    """Inside a write transaction: ``LeaseLost`` unless ``owner`` holds the intent in
    ``state`` (under ``fence`` when given), or the intent is gone."""
    row = conn.execute(
        "SELECT state, owner, fence FROM unresolved WHERE intent_id = ?", (intent_id,)
    ).fetchone()
    if row is None:
        return
    if (row[0], row[1]) != (state.value, str(owner)) or (fence is not None and row[2] != fence):
        raise LeaseLost(
            f"intent {intent_id} is no longer {state.value} under {owner}"
            + ("" if fence is None else f" with token {fence}"),
            intent_id=intent_id,
        )


def _intent_row(
    intent: PendingWrite, state: IntentState, owner: Owner, blob: bytes
) -> tuple[object, ...]:
    return (
        intent.intent_id,
        intent.session_id,
        str(intent.backend),
        state.value,
        str(owner),
        intent.created_at,
        time.time(),
        blob,
    )


def _insert_or_compare(
    conn: sqlite3.Connection, intent: PendingWrite, row: tuple[object, ...], keyring: Keyring
) -> None:
    """Inside a write transaction: record a new intent beside its session's live one (a write
    of its session); the same id again is a no-op if the content is the same."""
    found = conn.execute(
        "SELECT record FROM unresolved WHERE intent_id = ?", (intent.intent_id,)
    ).fetchone()
    if found is None:
        conn.execute(_INSERT_INTENT_SQL, (*row, 0))
        add_write(conn, (intent.session_id, str(intent.backend)))
    elif not PendingWrite.decode(found[0], keyring).same_content(intent):
        raise IntentConflict(
            f"intent {intent.intent_id} is recorded with other content",
            intent_id=intent.intent_id,
        )


def _open_locked(
    conn: sqlite3.Connection,
    intent: PendingWrite,
    state: IntentState,
    owner: Owner,
    expect_write_count: int | None,
    row: tuple[object, ...],
    keyring: Keyring,
) -> Opened:
    """``open_intent`` decided in full, inside a write transaction: every case the fast
    path's single statement leaves to it."""
    key = (intent.session_id, str(intent.backend))
    write_count = read_count(conn, key)
    found = conn.execute(_SELECT_INTENTS + " WHERE intent_id = ?", (intent.intent_id,)).fetchone()
    if found is not None:
        held = _entry(*found, keyring=keyring)
        if not held.intent.same_content(intent):
            raise IntentConflict(
                f"intent {intent.intent_id} is recorded with other content",
                intent_id=intent.intent_id,
            )
        if held.state is state and held.owner == owner:
            # Opened already by this same call, whose reply was lost: answer as it was.
            return Opened(recorded=True, write_count=int(found[-1]))
        return Opened(recorded=False, write_count=write_count, blocking=[held])
    rows: list[_Row] = conn.execute(
        _SELECT_INTENTS + " WHERE session_id = ? AND backend = ? ORDER BY created_at", key
    ).fetchall()
    if rows:
        return Opened(
            recorded=False,
            write_count=write_count,
            blocking=[_entry(*other, keyring=keyring) for other in rows],
        )
    if settled(conn, intent.intent_id):
        raise IntentConflict(
            f"intent {intent.intent_id} was already settled", intent_id=intent.intent_id
        )
    if expect_write_count is not None and write_count != expect_write_count:
        return Opened(recorded=False, write_count=write_count)
    # The session's live row takes it (made now when the session has none), its count moved.
    conn.execute(
        "INSERT INTO live (session_id, backend, write_count, counted_at, intent_id, state, owner,"
        " created_at, updated_at, record, fence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (session_id, backend) DO UPDATE SET write_count = excluded.write_count,"
        " counted_at = excluded.counted_at, intent_id = excluded.intent_id,"
        " state = excluded.state, owner = excluded.owner, created_at = excluded.created_at,"
        " updated_at = excluded.updated_at, record = excluded.record, fence = excluded.fence",
        (*key, write_count + 1, row[6], intent.intent_id, *row[3:], write_count),
    )
    return Opened(recorded=True, write_count=write_count)


def _entry(
    intent_id: str,
    session_id: str,
    backend: str,
    state: str,
    owner: str,
    updated_at: float,
    record: bytes,
    fence: int,
    *,
    keyring: Keyring,
) -> JournalEntry:
    return checked_entry(
        intent_id, session_id, backend, state, owner, updated_at, record, keyring, fence=fence
    )


def _decision(intent_id: str, session_id: str, record: bytes) -> Decision:
    return checked_decision(intent_id, session_id, record)
