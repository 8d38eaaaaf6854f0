"""The shared journal on Redis: one server that a fleet of workers records intents in.

Every operation that reads and then writes is one Lua script run on the server (the
``redis_scripts/*.lua`` files shipped with the package, called by EVALSHA, and by EVAL, which
loads them again, when the server lost them), so no other client's command runs between its
check and its write: ``open_intent``, ``record``, ``transition``, ``settle``, ``discard``,
``note`` and ``count_write``. Scripts receive every key they touch in ``KEYS``. Records are
stored as ``PendingWrite.encode()`` and ``Decision.encode()`` produce them, digest included,
and are checked again on every read.

Round trips. A write-ahead session calls ``open_intent`` and then ``discard`` on every
append, so each is one command: the writing scripts check (and on first use store) the
schema version themselves, with no separate check first, and ``discard``, ``transition``
and ``settle`` take the intent's session from where this object last saw the intent
(``open_intent`` and ``record`` note it). When that hint is missing, one ``HGET`` on
``index`` finds the session first; when it is stale, the script replies with the session
holding the intent and the call is made again there.

Keys, each under ``{prefix}:``::

    schema            string   layout version (1); refused when newer than this release's
    index             hash     unresolved intent id -> its session id
    settled           set      ids of settled intents
    seq               string   counter numbering decisions
    log               list     every decision's number, oldest first
    decided           hash     intent id -> its decisions' numbers, oldest first
    decision          hash     decision number -> encoded decision
    {T}:open          zset     the session's unresolved intent ids, scored by created_at
    {T}:record        hash     intent id -> encoded intent
    {T}:backend       hash     intent id -> backend identity
    {T}:state         hash     intent id -> state
    {T}:owner         hash     intent id -> owner
    {T}:updated       hash     intent id -> when state or owner last changed
    {T}:writes        hash     backend identity -> writes counted for the session
    {T}:decisions     list     the session's decisions' numbers, oldest first
    {T}:write_seq     hash     intent id -> the session's count before open_intent recorded it

``T`` is the first 32 hex digits of the blake3 digest of the session id, so a session's keys
share one hash tag whatever characters its id holds; the id itself is kept in ``index``.

The journal is as durable as the server keeps its data: run it with ``appendonly yes``
(``appendfsync always`` to survive power loss) and ``maxmemory-policy noeviction``, since an
evicted key loses intents or decisions.

Redis Cluster is not supported. Each writing script also touches global keys (``schema``
always; ``index`` and ``settled`` for record, open_intent, transition, discard and settle;
the decision log for settle and note), and ``get``, ``transition``, ``discard`` and
``settle`` find an intent's session through ``index``, ``pending(None)`` lists every
session through it, ``is_settled`` reads ``settled`` and ``decisions`` reads the log: those
keys hash to other slots than the sessions'. Use one Redis server (with replicas and
failover if needed) per journal.
"""

from __future__ import annotations

import asyncio
import enum
import os
import re
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from hashlib import sha1
from importlib import resources
from typing import Any, Final, NoReturn, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from blake3 import blake3

from ..errors import (
    ConfigurationError,
    IntentConflict,
    JournalCorrupt,
    JournalError,
    JournalUnavailable,
    RecordError,
    RecordTampered,
)
from ..ownership import Owner
from ..records import BackendIdentity, Decision, PendingWrite
from ._rows import checked_entry
from .base import IntentState, JournalEntry, Opened, require_limit, require_settling

try:
    import redis.asyncio as aioredis
    from redis import exceptions as redis_errors
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ConfigurationError(
        "the Redis journal needs redis-py: pip install 'agents-reconcile[redis]'"
    ) from exc

__all__ = ["DEFAULT_PREFIX", "SCHEMA_VERSION", "RedisJournal"]

SCHEMA_VERSION: Final = 1
DEFAULT_PREFIX: Final = "agents-reconcile-journal"

_T = TypeVar("_T")
_GLOBAL_KEYS: Final = ("schema", "index", "settled", "seq", "log", "decided", "decision")
_SESSION_KEYS: Final = (
    "open",
    "record",
    "backend",
    "state",
    "owner",
    "updated",
    "writes",
    "decisions",
    "write_seq",
)
# ``write_seq`` came after layout 1 without changing its number, because it only adds to it:
# an intent an older release opened lacks the field and reads as 0 (as one stored by record()
# does), and a field an older release leaves behind when it removes an intent is cleared when
# that id is next recorded. Raising the version would make running older workers refuse the
# journal and newer ones refuse it until migrated: a stopped fleet, for a key that older data
# can do without.
_VERSION: Final = str(SCHEMA_VERSION).encode()
_SCHEMA_REFUSAL: Final = "AGENTS_RECONCILE_SCHEMA"
# Attempts at an operation on an intent whose session keeps changing under it (discarded and
# recorded again elsewhere between the lookup and the script).
_ATTEMPTS: Final = 8
_HOMES_KEPT: Final = 4096
_SESSIONS_KEPT: Final = 1024
_DEFAULT_OPTIONS: Final[dict[str, Any]] = {
    "socket_connect_timeout": 5.0,
    "socket_timeout": 10.0,
}
# Replies that say the server cannot serve now, not that the journal is damaged.
_TRANSIENT_REPLIES: Final = (
    "BUSY",
    "LOADING",
    "MASTERDOWN",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "NOREPLICAS",
)
_CLUSTER_REPLIES: Final = ("MOVED", "ASK", "CROSSSLOT")

_Row = tuple[str, str, str, str, str, bytes]


class _Retry(enum.Enum):
    MOVED = "moved"
    """The intent's session changed between looking it up and acting on it."""


@dataclass(frozen=True, slots=True)
class _Moved:
    """A script found the intent held by another session than the one it was given (None:
    by no session)."""

    holder: str | None


class RedisJournal:
    """``IntentJournal`` on a Redis server, shared by every worker that uses the same server
    and ``prefix``.

    ``from_url`` builds the client; the constructor takes a ``redis.asyncio.Redis`` made by
    the caller, which should not decode responses. The schema version is written on first
    use (``migrate`` does it explicitly; ``check`` only reads).
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        where: str | None = None,
    ) -> None:
        if not isinstance(prefix, str) or not prefix:
            raise ConfigurationError("a Redis journal prefix must be a non-empty string")
        if "{" in prefix or "}" in prefix:
            # Braces would become the hash tag of every key, sessions' included.
            raise ConfigurationError(f"a Redis journal prefix may not hold braces: {prefix!r}")
        try:
            prefix.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigurationError(
                f"a Redis journal prefix must be encodable as UTF-8: {prefix!r}"
            ) from None
        self.prefix = prefix
        self._where = where if where is not None else _describe_client(client)
        self._secrets = _client_secrets(client)
        self._globals = [f"{prefix}:{name}" for name in _GLOBAL_KEYS]
        # Key names as sent, encoded once rather than on every command.
        self._global_keys = [key.encode("utf-8") for key in self._globals]
        self._bind(client)
        self._reopen: Callable[[], aioredis.Redis] | None = None
        self._loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._pid = os.getpid()
        self._schema_checked = False
        # Where this object last saw each intent it recorded: a hint that spares a lookup,
        # always checked by the script that uses it. Oldest first, so the oldest go first.
        self._homes: dict[str, str] = {}
        self._keyring: dict[str, list[bytes]] = {}

    @classmethod
    def from_url(cls, url: str, *, prefix: str = DEFAULT_PREFIX, **options: Any) -> RedisJournal:
        """A journal on the server at ``url`` (``redis://``, ``rediss://`` or ``unix://``).

        ``options`` go to ``redis.asyncio.Redis.from_url`` (for example ``socket_timeout``);
        connections are opened on first use. The URL's password never appears in messages.
        """
        where = _redacted_url(url)
        secrets = _url_secrets(url)
        settings = {**_DEFAULT_OPTIONS, **options, "decode_responses": False}
        try:
            client = aioredis.Redis.from_url(url, **settings)
        except (ValueError, TypeError, redis_errors.RedisError) as exc:
            detail = _scrub(str(exc), secrets)
            raise ConfigurationError(f"invalid Redis journal URL {where}: {detail}") from None
        journal = cls(client, prefix=prefix, where=where)
        journal._reopen = lambda: aioredis.Redis.from_url(url, **settings)
        return journal

    def __repr__(self) -> str:
        return f"RedisJournal({self._where!r}, prefix={self.prefix!r})"

    # -- connections, keys, scripts and errors --------------------------------------------

    def _bind(self, client: aioredis.Redis) -> None:
        self._client = client
        # Bound with a type: the driver leaves the method unannotated.
        self._execute: Callable[..., Awaitable[object]] = client.execute_command

    def _connected(self) -> None:
        """Connections belong to one event loop and one process. Used from another loop (a
        second ``asyncio.run``) or after a fork, a journal made by ``from_url`` opens a new
        pool and leaves the old one, which only its own loop could close. A journal built
        on a caller's client stays on that client."""
        loop = asyncio.get_running_loop()
        here = self._loop() if self._loop is not None else None
        if here is not loop or self._pid != os.getpid():
            if self._loop is not None and self._reopen is not None:
                self._bind(self._reopen())
            self._loop, self._pid = weakref.ref(loop), os.getpid()

    def _session_keys(self, session_id: str) -> list[bytes]:
        keys = self._keyring.get(session_id)
        if keys is None:
            tag = _tag(session_id)
            keys = [f"{self.prefix}:{{{tag}}}:{name}".encode() for name in _SESSION_KEYS]
            if len(self._keyring) >= _SESSIONS_KEPT:
                del self._keyring[next(iter(self._keyring))]
            self._keyring[session_id] = keys
        return keys

    def _keys(self, session_id: str) -> list[bytes]:
        """The global keys, then the session's: the layout every script but settle takes."""
        return self._global_keys + self._session_keys(session_id)

    @contextmanager
    def _translated(self, operation: str) -> Iterator[None]:
        try:
            yield
        except (redis_errors.RedisError, OSError) as exc:
            raise self._translate(exc, operation) from exc

    def _translate(self, exc: redis_errors.RedisError | OSError, operation: str) -> JournalError:
        if isinstance(exc, OSError):
            detail = _scrub(f"{type(exc).__name__}: {exc}", self._secrets)
            return JournalUnavailable(
                f"Redis journal {self._where} unreachable during {operation}: {detail}"
            )
        text = _scrub(str(exc), self._secrets)
        where = f"Redis journal {self._where} (prefix {self.prefix!r})"
        if isinstance(exc, redis_errors.ResponseError):
            if _SCHEMA_REFUSAL in text:
                stored = text.split(_SCHEMA_REFUSAL, 1)[1].strip()
                return self._schema_error(stored.encode())
            code = text.split(" ", 1)[0].upper()
            if code in _CLUSTER_REPLIES or isinstance(exc, redis_errors.ClusterCrossSlotError):
                return JournalUnavailable(
                    f"{where} answered {code} during {operation}: Redis Cluster is not supported"
                )
            if (
                isinstance(
                    exc,
                    redis_errors.ReadOnlyError
                    | redis_errors.OutOfMemoryError
                    | redis_errors.TryAgainError
                    | redis_errors.ClusterDownError
                    | redis_errors.NoPermissionError,
                )
                or code in _TRANSIENT_REPLIES
            ):
                return JournalUnavailable(f"{where} refused {operation}: {text}")
            return JournalCorrupt(f"{where} failed {operation}: {text}")
        return JournalUnavailable(
            f"{where} cannot be used for {operation}: {type(exc).__name__}: {text}"
        )

    async def _script(
        self, name: str, keys: list[bytes], args: list[str | bytes], *, writes: bool = True
    ) -> object:
        """Run a script as one command. A writing script checks the schema version itself
        (and stores it in an empty journal), so only reads check it first, once."""
        self._connected()
        if not writes:
            await self._ensure_schema()
        try:
            reply = await self._run(name, keys, args)
        except (redis_errors.RedisError, OSError) as exc:
            raise self._translate(exc, name) from exc
        if writes:
            self._schema_checked = True
        return reply

    async def _run(self, name: str, keys: list[bytes], args: list[str | bytes]) -> object:
        try:
            return await self._execute("EVALSHA", _sha(name), len(keys), *keys, *args)
        except redis_errors.NoScriptError:
            # The server lost its scripts (a restart, SCRIPT FLUSH): EVAL runs the source and
            # caches it again, in one command.
            return await self._execute("EVAL", _source(name), len(keys), *keys, *args)

    async def _command(self, operation: str, *args: str | bytes | int) -> object:
        self._connected()
        await self._ensure_schema()
        with self._translated(operation):
            reply: object = await self._execute(*args)
        return reply

    def _remember(self, intent_id: str, session_id: str) -> None:
        homes = self._homes
        if intent_id not in homes and len(homes) >= _HOMES_KEPT:
            del homes[next(iter(homes))]
        homes[intent_id] = session_id

    async def _lookup(self, intent_id: str) -> str | None:
        reply = await self._command("lookup", "HGET", self._globals[1], intent_id)
        if reply is None:
            self._homes.pop(intent_id, None)
            return None
        session_id = _text(reply, "an intent's session")
        self._remember(intent_id, session_id)
        return session_id

    async def _on_intent(
        self,
        intent_id: str,
        attempt: Callable[[str | None], Awaitable[_T | _Retry | _Moved]],
    ) -> _T:
        """Run ``attempt`` with the session holding the intent (None when none does), again
        where the script found the intent (or after a fresh lookup) while it is elsewhere."""
        session_id = self._homes.get(intent_id)
        if session_id is None:
            session_id = await self._lookup(intent_id)
        for _ in range(_ATTEMPTS):
            result = await attempt(session_id)
            if isinstance(result, _Moved):
                session_id = result.holder
                if session_id is None:
                    self._homes.pop(intent_id, None)
                else:
                    self._remember(intent_id, session_id)
                continue
            if not isinstance(result, _Retry):
                return result
            session_id = await self._lookup(intent_id)
        raise JournalUnavailable(
            f"intent {intent_id} kept moving between sessions; try again",
        )

    # -- schema -----------------------------------------------------------------------------

    def _schema_error(self, stored: bytes) -> JournalCorrupt:
        where = f"Redis journal {self._where} (prefix {self.prefix!r})"
        version = _version(stored)
        if version is None:
            return JournalCorrupt(f"{where} has no readable schema version ({stored[:40]!r})")
        if version > SCHEMA_VERSION:
            return JournalCorrupt(
                f"{where} has schema version {version}, newer than this release's "
                f"{SCHEMA_VERSION}; upgrade agents-reconcile"
            )
        return JournalCorrupt(
            f"{where} has schema version {version}, which this release does not read"
        )

    async def _ensure_schema(self) -> None:
        if not self._schema_checked:
            await self._migrate()

    async def _migrate(self) -> list[str]:
        self._connected()
        with self._translated("migrate"):
            reply = await self._run("migrate", self._global_keys, [_VERSION])
        parts = _list(reply, "migrate")
        status = _text(parts[0], "migrate") if parts else ""
        if status == "created" and len(parts) == 1:
            done = [f"set {self._globals[0]} to schema version {SCHEMA_VERSION}"]
        elif status == "found" and len(parts) == 2:
            stored = _blob(parts[1], "the schema version")
            if _version(stored) != SCHEMA_VERSION:
                raise self._schema_error(stored)
            done = []
        else:
            raise _unexpected("migrate", reply)
        self._schema_checked = True
        return done

    async def migrate(self) -> list[str]:
        """Store the schema version if the journal has none; returns what was done (nothing
        when the journal is current). A newer or unreadable version raises
        ``JournalCorrupt``."""
        return await self._migrate()

    async def check(self) -> str | None:
        """None when the journal's schema is current, else a sentence saying what is missing
        or wrong. Only reads."""
        self._connected()
        try:
            with self._translated("check"):
                stored = await self._execute("GET", self._globals[0])
        except JournalCorrupt as exc:
            return f"the key {self._globals[0]} cannot be read as a schema version: {exc}"
        if stored is None:
            return (
                f"the Redis journal {self._where} has no schema version under prefix "
                f"{self.prefix!r} (key {self._globals[0]}): run migrate()"
            )
        try:
            blob = _blob(stored, "the schema version")
        except JournalCorrupt:
            return f"the key {self._globals[0]} does not hold a schema version"
        if _version(blob) == SCHEMA_VERSION:
            return None
        return str(self._schema_error(blob))

    # -- IntentJournal ------------------------------------------------------------------

    def _intent_args(
        self, intent: PendingWrite, state: IntentState, owner: Owner
    ) -> list[str | bytes]:
        return [
            _VERSION,
            intent.intent_id,
            intent.session_id,
            str(intent.backend),
            state.value,
            str(owner),
            repr(float(intent.created_at)),
            repr(time.time()),
            intent.encode(),
        ]

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Owner) -> None:
        args = self._intent_args(intent, state, owner)
        keys = self._keys(intent.session_id)
        reply = _list(await self._script("record", keys, args), "record")
        status = _text(reply[0], "record") if reply else ""
        if status == "recorded" and len(reply) == 1:
            self._remember(intent.intent_id, intent.session_id)
            return
        if status == "exists" and len(reply) == 2:
            _compare(intent, reply[1])
            self._remember(intent.intent_id, intent.session_id)
            return
        _refuse(intent.intent_id, status, reply, "record")

    async def open_intent(
        self,
        intent: PendingWrite,
        *,
        state: IntentState,
        owner: Owner,
        expect_writes: int | None = None,
    ) -> Opened:
        args = self._intent_args(intent, state, owner)
        args.append("" if expect_writes is None else str(expect_writes))
        keys = self._keys(intent.session_id)
        reply = _list(await self._script("open_intent", keys, args), "open_intent")
        status = _text(reply[0], "open_intent") if reply else ""
        if status in ("settled", "taken") and len(reply) == 1:
            _refuse(intent.intent_id, status, reply, "open_intent")
        if len(reply) < 2:
            raise _unexpected("open_intent", reply)
        writes = _count(reply[1], "open_intent")
        if status == "recorded" and len(reply) == 2:
            self._remember(intent.intent_id, intent.session_id)
            return Opened(recorded=True, writes=writes)
        if status == "stale" and len(reply) == 2:
            return Opened(recorded=False, writes=writes)
        if status == "blocked" and len(reply) == 3:
            rows = _rows(reply[2], "open_intent")
            entries = [_entry(intent.session_id, row) for row in rows]
            return Opened(recorded=False, writes=writes, blocking=entries)
        if status == "held" and len(reply) == 4:
            [row] = _rows([reply[3]], "open_intent")
            held = _entry(intent.session_id, row)
            if not held.intent.same_content(intent):
                raise IntentConflict(
                    f"intent {intent.intent_id} is recorded with other content",
                    intent_id=intent.intent_id,
                )
            self._remember(intent.intent_id, intent.session_id)
            if held.state is state and held.owner == owner:
                # Opened already by this same call, whose reply was lost: answer as it was.
                # An intent opened by an older release, or by record(), has no count: 0.
                seq = _blob(reply[2], "an intent's write count")
                return Opened(recorded=True, writes=_count(seq, "open_intent") if seq else 0)
            return Opened(recorded=False, writes=writes, blocking=[held])
        raise _unexpected("open_intent", reply)

    async def writes(self, session_id: str, backend: BackendIdentity) -> int:
        key = self._session_keys(session_id)[_SESSION_KEYS.index("writes")]
        reply = await self._command("writes", "HGET", key, str(backend))
        return 0 if reply is None else _count(reply, "writes")

    async def count_write(self, session_id: str, backend: BackendIdentity) -> int:
        reply = await self._script("count_write", self._keys(session_id), [_VERSION, str(backend)])
        return _count(reply, "count_write")

    async def transition(
        self,
        intent_id: str,
        *,
        state: IntentState,
        owner: Owner,
        expect_state: IntentState | None = None,
        expect_owner: Owner | None = None,
    ) -> bool:
        async def attempt(session_id: str | None) -> bool | _Moved:
            if session_id is None:
                return False
            args: list[str | bytes] = [
                _VERSION,
                intent_id,
                session_id,
                state.value,
                str(owner),
                repr(time.time()),
                "0" if expect_state is None else "1",
                "" if expect_state is None else expect_state.value,
                "0" if expect_owner is None else "1",
                "" if expect_owner is None else str(expect_owner),
            ]
            reply = await self._script("transition", self._keys(session_id), args)
            if reply == 1 or reply == 0:
                return reply == 1
            return _moved(reply, "transition")

        return await self._on_intent(intent_id, attempt)

    async def discard(self, intent_id: str) -> None:
        async def attempt(session_id: str | None) -> _Moved | None:
            if session_id is None:
                return None
            keys = self._keys(session_id)
            reply = await self._script("discard", keys, [_VERSION, intent_id, session_id])
            if reply != 1:
                return _moved(reply, "discard")
            self._homes.pop(intent_id, None)
            return None

        await self._on_intent(intent_id, attempt)

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        if session_id is not None:
            return await self._session_entries(session_id, backend)
        reply = _list(await self._command("pending", "HVALS", self._globals[1]), "pending")
        sessions = sorted({_text(value, "an intent's session") for value in reply})
        found: list[JournalEntry] = []
        for session in sessions:
            found.extend(await self._session_entries(session, backend))
        # Each session's rows are oldest first already; a stable sort merges them.
        found.sort(key=lambda entry: entry.intent.created_at)
        return found

    async def _session_entries(
        self, session_id: str, backend: BackendIdentity | None
    ) -> list[JournalEntry]:
        args: list[str | bytes] = [
            session_id,
            "all",
            "0" if backend is None else "1",
            "" if backend is None else str(backend),
        ]
        keys = self._keys(session_id)
        rows = _rows(await self._script("entries", keys, args, writes=False), "pending")
        return [_entry(session_id, row) for row in rows]

    async def get(self, intent_id: str) -> JournalEntry | None:
        async def attempt(session_id: str | None) -> JournalEntry | _Retry | None:
            if session_id is None:
                return None
            keys = self._keys(session_id)
            args: list[str | bytes] = [session_id, "one", intent_id]
            rows = _rows(await self._script("entries", keys, args, writes=False), "get")
            if not rows:
                return _Retry.MOVED
            if len(rows) != 1 or rows[0][0] != intent_id:
                raise _unexpected("get", rows)
            return _entry(session_id, rows[0])

        return await self._on_intent(intent_id, attempt)

    async def is_settled(self, intent_id: str) -> bool:
        reply = await self._command("is_settled", "SISMEMBER", self._globals[2], intent_id)
        if reply not in (0, 1):
            raise _unexpected("is_settled", reply)
        return reply == 1

    async def settle(self, decision: Decision, *, owner: Owner | None = None) -> None:
        require_settling(decision, settling=True)
        intent_id = decision.intent_id
        record = decision.encode()
        deciding = self._session_keys(decision.session_id)

        async def attempt(session_id: str | None) -> _Moved | None:
            args: list[str | bytes] = [
                _VERSION,
                intent_id,
                "0" if session_id is None else "1",
                "" if session_id is None else session_id,
                "0" if owner is None else "1",
                "" if owner is None else str(owner),
                IntentState.RECONCILING.value,
                str(decision.backend),
                record,
            ]
            holding = deciding if session_id is None else self._session_keys(session_id)
            reply = _list(
                await self._script("settle", self._global_keys + holding + deciding, args),
                "settle",
            )
            status = _text(reply[0], "settle") if reply else ""
            if status == "moved":
                return _moved(reply, "settle")
            if len(reply) != 1:
                raise _unexpected("settle", reply)
            if status == "done":
                self._homes.pop(intent_id, None)
                return None
            if status == "settled":
                raise IntentConflict(f"intent {intent_id} was already settled", intent_id=intent_id)
            if status == "unclaimed":
                raise IntentConflict(
                    f"intent {intent_id} is not claimed by {owner}", intent_id=intent_id
                )
            raise _unexpected("settle", reply)

        await self._on_intent(intent_id, attempt)

    async def note(self, decision: Decision) -> None:
        require_settling(decision, settling=False)
        keys = self._keys(decision.session_id)
        args: list[str | bytes] = [_VERSION, decision.intent_id, decision.encode()]
        reply = await self._script("note", keys, args)
        _count(reply, "note")

    async def decisions(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[Decision]:
        require_limit(limit)
        keys = list(self._global_keys)
        if session_id is not None and intent_id is None:
            keys += self._session_keys(session_id)
        args: list[str | bytes] = [
            "0" if intent_id is None else "1",
            "" if intent_id is None else intent_id,
            str(limit),
            "1" if len(keys) > len(self._global_keys) else "0",
        ]
        reply = _list(await self._script("decisions", keys, args, writes=False), "decisions")
        chosen: list[Decision] = []
        for pair in reply:
            seq, record = _pair(pair)
            decision = _decoded(f"decision {seq}", f"decision {seq}", Decision.decode, record)
            # The list a number was found in is the row: a decision filed under another
            # intent or session than its record names must not pass as theirs.
            if intent_id is not None and decision.intent_id != intent_id:
                raise RecordTampered(
                    f"decision {seq} is filed under intent {intent_id} but names "
                    f"intent {decision.intent_id}"
                )
            if session_id is not None and decision.session_id != session_id:
                if intent_id is not None:
                    continue
                raise RecordTampered(
                    f"decision {seq} is filed under session {session_id!r} but names "
                    f"session {decision.session_id!r}"
                )
            chosen.append(decision)
            if len(chosen) == limit:
                break
        return chosen

    async def close(self) -> None:
        """Release the connection pool. A later operation opens connections again."""
        self._connected()
        self._schema_checked = False
        with self._translated("close"):
            await self._client.aclose(close_connection_pool=True)

    # -- for tests and operators ----------------------------------------------------------

    async def drop(self) -> int:
        """Delete every key of this journal: its intents, decisions, counts and schema
        version. For tests and operators; returns how many keys went.

        Walks the keyspace with SCAN (never KEYS) and deletes only keys laid out as this
        journal's, so a journal whose prefix extends this one's (``app`` and ``app:x``)
        keeps its keys."""
        pattern = _glob_escape(self.prefix) + ":*"
        mine = _key_pattern(self.prefix)
        deleted = 0
        cursor: object = 0
        self._connected()
        with self._translated("drop"):
            while True:
                reply = await self._execute("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
                if not isinstance(reply, list | tuple) or len(reply) != 2:
                    raise _unexpected("drop", reply)
                cursor, found = reply
                batch = [key for key in _list(found, "drop") if _is_key(mine, key)]
                if batch:
                    removed = await self._execute("UNLINK", *batch)
                    deleted += _count(removed, "drop")
                if cursor in (0, b"0", "0"):
                    break
        self._schema_checked = False
        self._homes.clear()
        return deleted


# -- scripts ----------------------------------------------------------------------------------


@cache
def _sha(name: str) -> str:
    return sha1(_source(name).encode("utf-8"), usedforsecurity=False).hexdigest()


@cache
def _source(name: str) -> str:
    folder = resources.files("agents_reconcile.journal").joinpath("redis_scripts")
    try:
        prelude = folder.joinpath("prelude.lua").read_text(encoding="utf-8")
        body = folder.joinpath(f"{name}.lua").read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(
            f"the Redis journal's script {name}.lua is missing from the installed package"
        ) from exc
    return prelude + "\n" + body


def _tag(session_id: str) -> str:
    return blake3(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _key_pattern(prefix: str) -> re.Pattern[bytes]:
    names = "|".join(_GLOBAL_KEYS)
    session = "|".join(_SESSION_KEYS)
    return re.compile(
        re.escape(prefix.encode())
        + rb":(?:(?:"
        + names.encode()
        + rb")|\{[0-9a-f]{32}\}:(?:"
        + session.encode()
        + rb"))",
    )


def _is_key(pattern: re.Pattern[bytes], key: object) -> bool:
    if isinstance(key, str):
        key = key.encode()
    return isinstance(key, bytes) and pattern.fullmatch(key) is not None


def _glob_escape(text: str) -> str:
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


# -- replies ----------------------------------------------------------------------------------


def _unexpected(operation: str, reply: object) -> JournalCorrupt:
    # The shape only: a reply may carry a batch's content.
    shape = type(reply).__name__
    if isinstance(reply, list | tuple):
        shape += f" of {len(reply)}"
    return JournalCorrupt(f"unexpected reply from the Redis journal to {operation}: {shape}")


def _moved(reply: object, operation: str) -> _Moved:
    """Reads a script's ``{'moved', holder}`` (``{'moved'}`` when no session holds the
    intent)."""
    parts = _list(reply, operation)
    if not 1 <= len(parts) <= 2 or _text(parts[0], operation) != "moved":
        raise _unexpected(operation, reply)
    return _Moved(_text(parts[1], "an intent's session") if len(parts) == 2 else None)


def _list(reply: object, operation: str) -> list[object]:
    if not isinstance(reply, list):
        raise _unexpected(operation, reply)
    return reply


def _text(value: object, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            pass
    raise JournalCorrupt(f"the Redis journal holds an unreadable value for {what}: {value!r:.80}")


def _blob(value: object, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise JournalCorrupt(f"the Redis journal holds an unreadable value for {what}: {value!r:.80}")


def _count(value: object, operation: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, bytes | str):
        text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
        if text.isdigit():
            return int(text)
    raise _unexpected(operation, value)


def _version(stored: bytes) -> int | None:
    text = stored.decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def _rows(reply: object, operation: str) -> list[_Row]:
    rows: list[_Row] = []
    for row in _list(reply, operation):
        fields = _list(row, operation)
        if len(fields) != 6:
            raise _unexpected(operation, row)
        intent_id, backend, state, owner, updated = (
            _text(value, f"an intent's {name}")
            for value, name in zip(
                fields[:5], ("id", "backend", "state", "owner", "update time"), strict=True
            )
        )
        rows.append((intent_id, backend, state, owner, updated, _blob(fields[5], "a record")))
    return rows


def _pair(value: object) -> tuple[str, bytes]:
    fields = _list(value, "decisions")
    if len(fields) != 2:
        raise _unexpected("decisions", value)
    return _text(fields[0], "a decision number"), _blob(fields[1], "a decision")


def _entry(session_id: str, row: _Row) -> JournalEntry:
    intent_id, backend, state, owner, updated, record = row
    return checked_entry(intent_id, session_id, backend, state, owner, updated, record)


def _decoded(name: str, ident: str, decode: Callable[[bytes], _T], record: bytes) -> _T:
    try:
        return decode(record)
    except RecordError as exc:
        if ident in str(exc):
            raise
        # Name the entry: a record that cannot be parsed at all cannot name itself.
        raise type(exc)(f"{name}: {exc}") from exc


def _compare(intent: PendingWrite, stored: object) -> None:
    """The same id again is a no-op when its content is the same, a conflict otherwise."""
    record = _blob(stored, "a record")
    existing = _decoded(f"intent {intent.intent_id}", intent.intent_id, PendingWrite.decode, record)
    if not existing.same_content(intent):
        raise IntentConflict(
            f"intent {intent.intent_id} is recorded with other content",
            intent_id=intent.intent_id,
        )


def _refuse(intent_id: str, status: str, reply: object, operation: str) -> NoReturn:
    if status == "settled":
        raise IntentConflict(f"intent {intent_id} was already settled", intent_id=intent_id)
    if status == "taken":
        # The id is held by another session; its record names that session, so it differs.
        raise IntentConflict(
            f"intent {intent_id} is recorded with other content", intent_id=intent_id
        )
    raise _unexpected(operation, reply)


# -- addresses and secrets --------------------------------------------------------------------


def _redacted_url(url: str) -> str:
    """The URL without its password (in the authority or the query)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}@{host}" if user else host
        query = urlencode(
            [(k, "***" if k.lower() == "password" else v) for k, v in parse_qsl(parts.query)]
        )
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "<unparsable Redis URL>"


def _url_secrets(url: str) -> list[str]:
    try:
        parts = urlsplit(url)
        found = [parts.password or ""]
        found += [v for k, v in parse_qsl(parts.query) if k.lower() == "password"]
    except ValueError:
        return []
    return [secret for secret in found if secret]


def _client_secrets(client: aioredis.Redis) -> list[str]:
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    password = kwargs.get("password") if isinstance(kwargs, dict) else None
    return [password] if isinstance(password, str) and password else []


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def _describe_client(client: aioredis.Redis) -> str:
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    if not isinstance(kwargs, dict):
        return "redis"
    db = kwargs.get("db", 0)
    if kwargs.get("path"):
        return f"unix://{kwargs['path']}?db={db}"
    return f"redis://{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{db}"
