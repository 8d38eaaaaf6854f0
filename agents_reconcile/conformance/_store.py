"""The revisioned store contracts (``RevisionedStore``): an append is a compare-and-swap on the
session's head revision that records its write id in the same step as the items, and every
write moves the head by one.

Each check asks the subject's ``store`` hook for store objects of session ids no other check
uses; two calls with one id are two workers on the same data. A revisioned store is also a
full SDK ``Session``: ``check_store`` and ``RevisionedStoreContract`` check the session
contracts on it too.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import orjson

from .._core.fingerprint import digest_items
from .._core.revision import RevisionedStore, WriteRecord
from .._core.session_protocol import HISTORY_METHODS
from ..errors import RevisionConflict, SchemaMismatch
from ._core import Subject, contract, fail, refused, require
from ._journal_reads import newer_schema_refused, schema_holds
from ._session import item, new_session_id

__all__ = ["PLAIN_VALUES", "store_of"]


async def store_of(subject: Subject, session_id: str) -> Any:
    """The subject's store object for ``session_id``."""
    return await subject.make("store", session_id)


def _texts(items: list[Any]) -> list[Any]:
    return [found.get("content") if isinstance(found, dict) else found for found in items]


async def _writes(store: Any, after: int = 0, **kwargs: Any) -> list[WriteRecord]:
    found: list[WriteRecord] = await store.writes_after(after, **kwargs)
    return found


@contract("store")
async def is_a_session_and_revisioned(subject: Subject) -> None:
    """The store is a ``RevisionedStore`` (``head``, ``append_if``, ``find_write``,
    ``writes_after``) and a full SDK ``Session``, named by the session id it was opened for."""
    session_id = new_session_id()
    store = await store_of(subject, session_id)
    wanted = ("head", "append_if", "find_write", "writes_after", *HISTORY_METHODS)
    missing = [name for name in wanted if not callable(getattr(store, name, None))]
    require(not missing, f"it lacks {', '.join(missing)}")
    require(isinstance(store, RevisionedStore), "isinstance(store, RevisionedStore) is False")
    found = getattr(store, "session_id", None)
    require(found == session_id, f"its session_id is {found!r}, not {session_id!r}")


@contract("store")
async def a_new_session_is_at_revision_zero(subject: Subject) -> None:
    """A session never written is at head revision 0, with no record of writes."""
    store = await store_of(subject, new_session_id())
    head = await store.head()
    require(head == 0, f"a new session is at revision {head!r}, not 0")
    require(await store.find_write("nothing") is None, "find_write() found a write never made")
    require(await _writes(store) == [], "writes_after(0) of a new session lists writes")


@contract("store")
async def append_if_on_a_stale_head_writes_nothing(subject: Subject) -> None:
    """``append_if()`` expecting another head than the session's raises ``RevisionConflict``
    (with ``expected`` and ``actual``) and writes nothing: no item, no record, no move of the
    head."""
    store = await store_of(subject, new_session_id())
    await store.add_items([item("a")])
    for expected in (0, 2):
        caught = await refused(
            RevisionConflict,
            store.append_if([item("b")], expected=expected, write_id=f"w-{expected}", writer="me"),
            f"append_if(expected={expected}) at head 1",
        )
        pair = (getattr(caught, "expected", None), getattr(caught, "actual", None))
        require(pair == (expected, 1), f"the RevisionConflict says (expected, actual) = {pair}")
        require(_texts(await store.get_items()) == ["a"], "a refused append wrote items")
        require(await store.find_write(f"w-{expected}") is None, "a refused append is recorded")
        require(await store.head() == 1, "a refused append moved the head")
        require(len(await _writes(store)) == 1, "a refused append left a record of writes")


@contract("store")
async def a_write_id_is_recorded_once(subject: Subject) -> None:
    """``append_if()`` under a write id already recorded raises ``RevisionConflict`` and writes
    nothing, even against the current head."""
    store = await store_of(subject, new_session_id())
    await store.append_if([item("a")], expected=0, write_id="w", writer="me")
    await refused(
        RevisionConflict,
        store.append_if([item("a")], expected=1, write_id="w", writer="me"),
        "append_if() under a write id already recorded",
    )
    require(_texts(await store.get_items()) == ["a"], "the second append under one id wrote")
    require(await store.head() == 1, "the second append under one id moved the head")


@contract("store")
async def a_write_is_found_by_its_id(subject: Subject) -> None:
    """After ``append_if()`` returns the new head, ``find_write()`` (by this and another store
    object of the session) finds the write by its id with the revision it produced, its writer,
    kind ``append`` and its item count; an id never written is not found."""
    session_id = new_session_id()
    store = await store_of(subject, session_id)
    await store.add_items([item("x")])
    revision = await store.append_if(
        [item("a"), item("b")], expected=1, write_id="w-2", writer="worker-1"
    )
    require(revision == 2, f"append_if() at head 1 returned {revision!r}, not the new head 2")
    other = await store_of(subject, session_id)
    for who, reader in (("the writer", store), ("another store object", other)):
        found = await reader.find_write("w-2")
        if found is None:
            fail(f"find_write() by {who} does not find the write just made")
        seen = (found.revision, found.write_id, found.writer, found.kind, found.count)
        wanted = (2, "w-2", "worker-1", "append", 2)
        require(seen == wanted, f"find_write() by {who} gives {seen}, not {wanted}")
        require(found.at > 0, f"find_write() by {who} gives no time ({found.at!r})")
    require(await store.find_write("never") is None, "find_write() found an id never written")


@contract("store")
async def every_write_moves_the_head_by_one(subject: Subject) -> None:
    """Each write (``add_items``, ``append_if``, ``pop_item``, ``clear_session``) moves the head
    by exactly one and is recorded at that revision with its kind and count."""
    store = await store_of(subject, new_session_id())
    heads: list[int] = []
    await store.add_items([item("a"), item("b")])
    heads.append(await store.head())
    await store.append_if([item("c")], expected=1, write_id="w-2", writer="me")
    heads.append(await store.head())
    popped = await store.pop_item()
    heads.append(await store.head())
    await store.clear_session()
    heads.append(await store.head())
    require(heads == [1, 2, 3, 4], f"after append, append_if, pop, clear the heads are {heads}")
    require(_texts([popped]) == ["c"], f"pop_item() returned {popped!r}")
    writes = await _writes(store)
    recorded = [(w.revision, w.kind, w.count) for w in writes]
    wanted = [(1, "append", 2), (2, "append", 1), (3, "pop", 1), (4, "clear", 2)]
    require(recorded == wanted, f"the record of writes is {recorded}, not {wanted}")
    require(writes[1].write_id == "w-2", f"append_if() was recorded as {writes[1].write_id!r}")
    require(await store.get_items() == [], "items are left after clear_session()")


@contract("store")
async def an_empty_append_if_still_moves_the_head(subject: Subject) -> None:
    """``append_if([])`` is a write too: it moves the head by one and is recorded under its id
    (the wrapper fences a store against an abandoned write this way)."""
    store = await store_of(subject, new_session_id())
    await store.add_items([item("a")])
    revision = await store.append_if([], expected=1, write_id="void", writer="me")
    require(revision == 2, f"an empty append_if() at head 1 returned {revision!r}, not 2")
    require(await store.head() == 2, "an empty append_if() did not move the head")
    found = await store.find_write("void")
    require(found is not None and found.revision == 2, f"an empty append is recorded as {found}")
    require(_texts(await store.get_items()) == ["a"], "an empty append changed the items")
    await refused(
        RevisionConflict,
        store.append_if([item("late")], expected=1, write_id="late", writer="me"),
        "append_if() expecting the head an empty append moved past",
    )


@contract("store")
async def writes_after_is_oldest_first_and_limited(subject: Subject) -> None:
    """``writes_after(revision, limit=N)`` lists the recorded writes above ``revision``, oldest
    first, at most N."""
    store = await store_of(subject, new_session_id())
    for n in range(5):
        await store.append_if([item(f"i{n}")], expected=n, write_id=f"w-{n + 1}", writer="me")
    for after, limit, wanted in (
        (0, None, [1, 2, 3, 4, 5]),
        (2, None, [3, 4, 5]),
        (2, 2, [3, 4]),
        (0, 1, [1]),
        (5, None, []),
    ):
        kwargs = {} if limit is None else {"limit": limit}
        found = await _writes(store, after, **kwargs)
        revisions = [w.revision for w in found]
        call = f"writes_after({after}{'' if limit is None else f', limit={limit}'})"
        require(revisions == wanted, f"{call} lists revisions {revisions}, not {wanted}")
        names = [w.write_id for w in found]
        require(names == [f"w-{r}" for r in wanted], f"{call} lists write ids {names}")


@contract("store")
async def sessions_keep_their_own_heads_and_records(subject: Subject) -> None:
    """Two sessions of one store keep their own heads and records of writes."""
    one = await store_of(subject, new_session_id("one"))
    two = await store_of(subject, new_session_id("two"))
    await one.add_items([item("a")])
    await one.add_items([item("b")])
    await two.add_items([item("x")])
    heads = (await one.head(), await two.head())
    require(
        heads == (2, 1), f"after two writes to one session and one to another the heads are {heads}"
    )
    await two.append_if([item("y")], expected=1, write_id="w", writer="me")
    require(await one.find_write("w") is None, "one session finds another's write")
    listed = [w.revision for w in await _writes(two)]
    require(listed == [1, 2], f"a session's record lists revisions {listed}, not [1, 2]")


@contract("store")
async def racing_appends_commit_exactly_one(subject: Subject) -> None:
    """Workers (store objects of one session) appending against the same head at once: exactly
    one commits each round, and the others raise ``RevisionConflict``."""
    session_id = new_session_id("shared")
    workers = [await store_of(subject, session_id) for _ in range(4)]

    async def attempt(worker: Any, round_: int, index: int, head: int) -> bool:
        try:
            await worker.append_if(
                [item(f"r{round_}-w{index}")],
                expected=head,
                write_id=f"r{round_}-w{index}",
                writer=f"w{index}",
            )
        except RevisionConflict:
            return False
        return True

    for round_ in range(5):
        head = await workers[0].head()
        won = await asyncio.gather(
            *(attempt(worker, round_, index, head) for index, worker in enumerate(workers))
        )
        require(sum(won) == 1, f"round {round_}: {sum(won)} appends against head {head} landed")
    require(await workers[1].head() == 5, "after five rounds the head is not 5")
    require(len(await workers[2].get_items()) == 5, "after five rounds there are not five items")


PLAIN_VALUES: Final[tuple[dict[str, Any], ...]] = (
    {
        "type": "function_call_output",
        "call_id": "call_null",
        "output": None,
        "status": None,
        "extra": {"missing": None, "list": [None, None]},
    },
    {
        "role": "user",
        "content": "numbers",
        "zero": 0,
        "negative": -17,
        "large": 9_007_199_254_740_991,
        "fraction": 0.1,
        "precise": 3.141592653589793,
        "tiny": 1.5e-300,
        "whole_float": 2.0,
        "negative_zero": -0.0,
    },
    {"role": "user", "content": "truths", "yes": True, "no": False, "flags": [True, False, None]},
    {
        "role": "assistant",
        "content": [{"type": "output_text", "text": "", "annotations": []}],
        "nested": [[1, [2, [3, []]]], [], {}, [{"a": [None, {"b": [False, 0, ""]}]}]],
        "empty": {},
    },
)
"""Items holding JSON's plain values: nulls, integers, floats, booleans, empty and nested
lists and objects."""


def _typed(found: Any) -> bytes:
    """``found`` as canonical JSON: its types count (1, 1.0 and true differ), its key order
    does not."""
    return orjson.dumps(found, option=orjson.OPT_SORT_KEYS)


@contract("store")
async def items_with_nulls_numbers_booleans_and_nested_lists_read_back_exactly(
    subject: Subject,
) -> None:
    """Items holding nulls, integers, floats, booleans, empty and nested lists and objects read
    back from the store exactly as written (the same values of the same types, the same
    fingerprints), through ``get_items()`` with and without a limit and through another store
    object of the session: a store that drops a null or turns a number into text changes
    what the wrapper compares, and a write it made looks like someone else's."""
    session_id = new_session_id()
    store = await store_of(subject, session_id)
    written = [dict(found) for found in PLAIN_VALUES]
    await store.add_items(written[:2])
    await store.append_if(written[2:], expected=1, write_id="plain", writer="me")
    other = await store_of(subject, session_id)
    for how, found in (
        ("get_items()", await store.get_items()),
        ("get_items(limit=3)", [None, *await store.get_items(limit=3)]),
        ("another store object's get_items()", await other.get_items()),
    ):
        require(len(found) == len(written), f"{how} gives {len(found)} items, not {len(written)}")
        for index, (wanted, got) in enumerate(zip(PLAIN_VALUES, found, strict=True)):
            if got is None and how.endswith("(limit=3)") and index == 0:
                continue
            if _typed(got) != _typed(wanted) or digest_items([got]) != digest_items([wanted]):
                fail(f"{how}: item {index} reads back as {got!r}, not {wanted!r}")


@contract("store")
async def store_schema_check_writes_nothing_and_migrate_is_idempotent(subject: Subject) -> None:
    """Where the store's storage has a schema, ``check()`` and ``schema_version()`` write
    nothing, ``migrate()`` leaves ``check()`` satisfied with a version in place, and
    ``migrate()`` again applies nothing."""
    await schema_holds(await store_of(subject, new_session_id()), "store")


@contract("store", last=True)
async def a_newer_store_schema_is_refused(subject: Subject) -> None:
    """A store whose storage holds a newer schema version than it knows refuses it: ``check()``
    says so, and ``migrate()`` and writes raise ``SchemaMismatch`` without changing it."""
    store = await store_of(subject, new_session_id())

    def write(later: Any) -> Any:
        return later.add_items([item("b")])

    await newer_schema_refused(subject, store, "store", SchemaMismatch, write)
