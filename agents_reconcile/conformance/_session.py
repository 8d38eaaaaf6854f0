"""The plain SDK ``Session`` contracts: what the wrapper relies on of any session it wraps.

It judges a pending write by the tail it reads back (``get_items(limit=N)``: the newest N,
oldest first, fewer only when the history is shorter) and compares content fingerprints, so
items must read back as they were written. Each check asks the subject's ``session`` hook for
a session object of a session id no other check uses (two calls with one id: two objects on
the same data).
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from .._core.fingerprint import digest_items
from .._core.session_protocol import HISTORY_METHODS
from .._session.inner import accepts
from ._core import Subject, contract, fail, require, skip

__all__ = ["ROUND_TRIP_ITEMS", "item", "new_session_id", "session_of"]

ROUND_TRIP_ITEMS: Final[tuple[dict[str, Any], ...]] = (
    {"role": "user", "content": "hello, ünïcødé ✓ 日本語 and an emoji 🙂"},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "lookup",
        "arguments": '{"q": "weather", "days": 3}',
        "id": "fc_1",
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 °C"},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}],
    },
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": 'line one\nline two\t"quoted" \\ backslash'},
            {"type": "input_text", "text": ""},
        ],
    },
)
"""Items of the kinds a run stores, which every session must give back as they were."""


def new_session_id(label: str = "s") -> str:
    """A session id no other check uses."""
    return f"conformance-{label}-{uuid.uuid4().hex[:12]}"


def item(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": text}


async def session_of(subject: Subject, session_id: str) -> Any:
    """The subject's session object for ``session_id``."""
    return await subject.make("session", session_id)


async def _items(session: Any, **kwargs: Any) -> list[Any]:
    found = await session.get_items(**kwargs)
    require(isinstance(found, list), f"get_items() returned a {type(found).__name__}, not a list")
    return list(found)


def _texts(items: list[Any]) -> list[Any]:
    return [found.get("content") if isinstance(found, dict) else found for found in items]


@contract("session")
async def is_a_session(subject: Subject) -> None:
    """The session offers the SDK ``Session`` methods the wrapper calls (``get_items``,
    ``add_items``, ``pop_item``, ``clear_session``) and the ``session_id`` it was opened for."""
    session_id = new_session_id()
    session = await session_of(subject, session_id)
    missing = [name for name in HISTORY_METHODS if not callable(getattr(session, name, None))]
    require(not missing, f"it lacks {', '.join(missing)}")
    found = getattr(session, "session_id", None)
    require(found == session_id, f"its session_id is {found!r}, not {session_id!r}")


@contract("session")
async def a_new_session_is_empty(subject: Subject) -> None:
    """A session never written holds no items: ``get_items()`` returns none (with a limit too)
    and ``pop_item()`` returns None."""
    session = await session_of(subject, new_session_id())
    require(await _items(session) == [], "get_items() of a new session returned items")
    if accepts(session.get_items, "limit"):
        require(await _items(session, limit=3) == [], "get_items(limit=3) returned items")
    popped = await session.pop_item()
    require(popped is None, f"pop_item() of a new session returned {popped!r}, not None")


@contract("session")
async def add_items_appends_in_order(subject: Subject) -> None:
    """``add_items()`` appends its batch after what is there, in order, and ``get_items()``
    returns the whole history oldest first."""
    session = await session_of(subject, new_session_id())
    batches = [["a", "b"], ["c"], ["d", "e", "f"]]
    for batch in batches:
        await session.add_items([item(text) for text in batch])
    found = _texts(await _items(session))
    wanted = [text for batch in batches for text in batch]
    require(found == wanted, f"after three appends get_items() holds {found}, not {wanted}")


@contract("session")
async def items_read_back_as_written(subject: Subject) -> None:
    """Items read back equal to what was written, with the same content fingerprints (messages,
    tool calls and outputs, nested content, non-ASCII and escaped text): the wrapper compares
    fingerprints, and an item changed by the store looks like someone else's write."""
    session = await session_of(subject, new_session_id())
    written = [dict(found) for found in ROUND_TRIP_ITEMS]
    await session.add_items(written)
    found = await _items(session)
    require(len(found) == len(written), f"{len(written)} items written, {len(found)} read back")
    wanted, read = digest_items(ROUND_TRIP_ITEMS), digest_items(found)
    for index, (expected, got) in enumerate(zip(wanted, read, strict=True)):
        if expected != got:
            fail(f"item {index} reads back as {found[index]!r}, not {ROUND_TRIP_ITEMS[index]!r}")


@contract("session")
async def get_items_limit_returns_the_newest_oldest_first(subject: Subject) -> None:
    """``get_items(limit=N)`` returns the newest N items in chronological order (all of them,
    only when there are fewer), which the wrapper's reads of the tail rely on."""
    session = await session_of(subject, new_session_id())
    if not accepts(session.get_items, "limit"):
        skip("get_items() takes no limit: the wrapper reads the whole history and keeps its tail")
    texts = ["i0", "i1", "i2", "i3", "i4"]
    await session.add_items([item(text) for text in texts[:2]])
    await session.add_items([item(text) for text in texts[2:]])
    for limit in (1, 2, 3, 5, 6, 50):
        found = _texts(await _items(session, limit=limit))
        wanted = texts[-limit:]
        require(found == wanted, f"get_items(limit={limit}) returned {found}, not {wanted}")


@contract("session")
async def pop_item_removes_and_returns_the_newest(subject: Subject) -> None:
    """``pop_item()`` removes the newest item and returns it, leaving the rest in order, and
    returns None once the session is empty."""
    session = await session_of(subject, new_session_id())
    await session.add_items([item("a"), item("b")])
    await session.add_items([item("c")])
    for wanted, left in (("c", ["a", "b"]), ("b", ["a"]), ("a", [])):
        popped = await session.pop_item()
        got = popped.get("content") if isinstance(popped, dict) else popped
        require(got == wanted, f"pop_item() returned {got!r}, not the newest item {wanted!r}")
        found = _texts(await _items(session))
        require(found == left, f"after pop_item() the session holds {found}, not {left}")
    popped = await session.pop_item()
    require(popped is None, f"pop_item() of an emptied session returned {popped!r}")


@contract("session")
async def clear_session_empties_it(subject: Subject) -> None:
    """``clear_session()`` removes every item of its session, and later appends start a new
    history."""
    session = await session_of(subject, new_session_id())
    await session.add_items([item("a"), item("b")])
    await session.clear_session()
    require(await _items(session) == [], "after clear_session() items are left")
    await session.add_items([item("c")])
    found = _texts(await _items(session))
    require(found == ["c"], f"an append after clear_session() reads back as {found}")


@contract("session")
async def sessions_keep_their_own_items(subject: Subject) -> None:
    """Two session ids on one store keep their own items: appending, popping or clearing one
    leaves the other alone."""
    one = await session_of(subject, new_session_id("one"))
    two = await session_of(subject, new_session_id("two"))
    await one.add_items([item("a"), item("b")])
    await two.add_items([item("x")])
    await one.pop_item()
    require(_texts(await _items(two)) == ["x"], "a pop on one session changed another")
    await one.clear_session()
    require(_texts(await _items(two)) == ["x"], "clearing one session changed another")
    await two.add_items([item("y")])
    require(await _items(one) == [], "an append to one session showed in another")
