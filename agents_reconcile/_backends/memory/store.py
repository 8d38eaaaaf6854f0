"""``MemoryRevisionedSession``: the revisioned capability in memory, for tests and examples."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..._core.revision import WriteRecord
from ...errors import RevisionConflict
from ..schema import Unversioned
from ..store_items import ANONYMOUS, decode_item, encode_item, new_write_id, valid_limit

__all__ = ["MemoryRevisionedSession"]


class _Data:
    def __init__(self) -> None:
        self.items: list[bytes] = []
        self.writes: list[WriteRecord] = []
        self.by_id: dict[str, WriteRecord] = {}


# The data of ``memory:`` addresses, one mapping per address and namespace (see from_address).
_SPACES: dict[tuple[str, str], dict[str, Any]] = {}


class MemoryRevisionedSession(Unversioned):
    """A full SDK ``Session`` with a head revision and a record of writes, in this process.

    Sessions built with the same ``shared`` mapping see the same data, like two workers on
    one server.
    """

    @classmethod
    def from_address(
        cls,
        session_id: str,
        address: str,
        *,
        namespace: str | None = None,
        migrate: bool = True,
    ) -> MemoryRevisionedSession:
        """A session on ``address`` (``memory://<name>``): sessions of one address and
        namespace share their data, until ``drop``."""
        session = cls(session_id, shared=_SPACES.setdefault((address, namespace or ""), {}))
        session._space = (address, namespace or "")
        return session

    def __init__(self, session_id: str, *, shared: dict[str, Any] | None = None) -> None:
        self.session_id = session_id
        self.session_settings = None
        store = shared if shared is not None else {}
        data = store.get(session_id)
        if not isinstance(data, _Data):
            data = store[session_id] = _Data()
        self._data = data
        self._lock = asyncio.Lock()
        self._space: tuple[str, str] | None = None

    async def close(self) -> None:
        """Nothing to release: the data lives as long as the process (or ``shared``)."""

    async def drop(self) -> None:
        """Forget every session of this object's ``memory:`` address (for tests)."""
        if self._space is not None:
            _SPACES.pop(self._space, None)

    def _record(self, kind: str, count: int, write_id: str, writer: str) -> int:
        revision = len(self._data.writes) + 1
        record = WriteRecord(revision, write_id, writer, kind, count, time.time())
        self._data.writes.append(record)
        self._data.by_id[write_id] = record
        return revision

    # -- Session -------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        limit = valid_limit(limit)
        items = self._data.items if limit is None else self._data.items[-limit:] if limit else []
        return [decode_item(raw) for raw in items]

    async def add_items(self, items: list[Any]) -> None:
        if not items:
            return
        encoded = [encode_item(item, index) for index, item in enumerate(items)]
        self._data.items.extend(encoded)
        self._record("append", len(encoded), new_write_id(), ANONYMOUS)

    async def pop_item(self) -> Any | None:
        if not self._data.items:
            return None
        raw = self._data.items.pop()
        self._record("pop", 1, new_write_id(), ANONYMOUS)
        return decode_item(raw)

    async def clear_session(self) -> None:
        count = len(self._data.items)
        self._data.items.clear()
        self._record("clear", count, new_write_id(), ANONYMOUS)

    # -- RevisionedStore -----------------------------------------------------------------

    async def head(self) -> int:
        return len(self._data.writes)

    async def append_if(
        self, items: list[Any], *, expected: int, write_id: str, writer: str
    ) -> int:
        encoded = [encode_item(item, index) for index, item in enumerate(items)]
        actual = len(self._data.writes)
        if actual != expected or write_id in self._data.by_id:
            raise RevisionConflict(
                f"session {self.session_id!r} is at revision {actual}, not {expected}",
                expected=expected,
                actual=actual,
            )
        self._data.items.extend(encoded)
        return self._record("append", len(encoded), write_id, writer)

    async def find_write(self, write_id: str) -> WriteRecord | None:
        return self._data.by_id.get(write_id)

    async def writes_after(self, revision: int, *, limit: int = 100) -> list[WriteRecord]:
        return self._data.writes[max(revision, 0) : max(revision, 0) + limit]


# Its public name: the identity a journal records for this store (``BackendIdentity.kind``)
# does not change when the file that defines it moves.
MemoryRevisionedSession.__module__ = "agents_reconcile"
