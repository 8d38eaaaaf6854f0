"""What every revisioned store does beyond the contracts ``agents_reconcile.conformance`` holds
it to (``test_conformance`` runs those on each): the SDK's runner over it, values it must store
exactly or refuse, schemas, reopening, event loops and credentials.
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import math
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents_reconcile._backends.schema import Unversioned
from agents_reconcile._backends.store_items import decode_item, encode_item
from agents_reconcile.errors import FingerprintError, SchemaMismatch

from ..support.backends import Place, closed_port, registered
from ..support.strategies import surrogate_text

Opener = Callable[[str], Awaitable[Any]]


def item(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": text}


@pytest.fixture(params=registered("store"))
async def place(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Place]:
    """Where each registered backend keeps this test's stores (on a server, a namespace of
    their own); every store opened there is closed and its data deleted afterwards."""
    found = Place(request.param, tmp_path, "store")
    yield found
    await found.cleanup()


@pytest.fixture
def opener(place: Place) -> Opener:
    """Opens store objects on one registered backend: two objects with the same session id
    are two workers on the same data."""

    async def open_store(session_id: str) -> Any:
        return place.store(session_id)

    return open_store


async def test_items_round_trip_in_order_and_limit_reads_the_tail(opener: Opener) -> None:
    """Items come back in append order, and a limit returns the newest ones."""
    store = await opener("s")
    await store.add_items([item("a"), item("b", "assistant")])
    await store.add_items(
        [item("c"), {"type": "function_call_output", "call_id": "x", "output": "ok"}]
    )
    assert await store.get_items() == [
        item("a"),
        item("b", "assistant"),
        item("c"),
        {"type": "function_call_output", "call_id": "x", "output": "ok"},
    ]
    assert await store.get_items(limit=2) == [
        item("c"),
        {"type": "function_call_output", "call_id": "x", "output": "ok"},
    ]
    assert await store.get_items(limit=0) == []
    assert len(await store.get_items(limit=100)) == 4


async def test_works_with_the_sdk_runner_directly(opener: Opener) -> None:
    """The SDK's Runner uses a store directly as its session."""
    from agents import Agent, Runner
    from agents.testing import ScriptedModel, assistant_message

    store = await opener("runner")
    agent = Agent(name="a", model=ScriptedModel([[assistant_message("hello")]]))
    result = await Runner.run(agent, "hi", session=store)
    assert result.final_output == "hello"
    stored = await store.get_items()
    assert stored[0] == {"role": "user", "content": "hi"}
    assert len(stored) == 2
    assert await store.head() == 2


def nonfinite_items() -> list[dict[str, Any]]:
    """Items holding NaN, inf and -inf at a top-level key, a nested key and list slots."""
    return [
        {"type": "function_call_output", "call_id": "c1", "output": "ok", "score": float("nan")},
        {"role": "user", "content": [{"type": "input_text", "range": [float("-inf"), 1.5]}]},
        {"role": "assistant", "content": "fine", "meta": {"best": float("inf"), "none": None}},
    ]


def assert_nonfinite_items(stored: list[Any]) -> None:
    """The items of ``nonfinite_items`` as read back: NaN and the infinities, not null."""
    assert math.isnan(stored[0]["score"])
    assert {k: v for k, v in stored[0].items() if k != "score"} == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": "ok",
    }
    assert stored[1] == {
        "role": "user",
        "content": [{"type": "input_text", "range": [-math.inf, 1.5]}],
    }
    assert stored[2] == {
        "role": "assistant",
        "content": "fine",
        "meta": {"best": math.inf, "none": None},
    }


async def test_nonfinite_floats_read_back_as_themselves(opener: Opener) -> None:
    """NaN, inf and -inf are stored as they are (as the SDK's sessions keep them), not as null."""
    store = await opener("s")
    await store.add_items(nonfinite_items()[:2])
    await store.append_if(nonfinite_items()[2:], expected=1, write_id="w", writer="me")
    assert_nonfinite_items(await store.get_items())
    assert_nonfinite_items(await (await opener("s")).get_items())
    tail = await store.get_items(limit=2)
    assert tail[1]["meta"]["best"] == math.inf
    assert (await store.pop_item())["meta"]["best"] == math.inf


async def test_an_item_it_cannot_store_exactly_is_refused_and_nothing_written(
    opener: Opener,
) -> None:
    """A datetime inside an item raises FingerprintError naming it; nothing is written."""
    store = await opener("s")
    batch = [item("a"), {"role": "user", "content": [{"ts": datetime.datetime(2024, 5, 1)}]}]
    with pytest.raises(FingerprintError) as caught:
        await store.add_items(batch)
    assert caught.value.index == 1
    assert "datetime.datetime" in str(caught.value)
    assert '["content"][0]["ts"]' in str(caught.value)
    with pytest.raises(FingerprintError):
        await store.append_if(batch, expected=0, write_id="w", writer="me")
    assert await store.get_items() == []
    assert await store.head() == 0
    assert await store.find_write("w") is None
    assert await store.writes_after(0) == []


def json_equal(one: Any, two: Any) -> bool:
    """Equality as JSON values, where NaN equals NaN, a tuple equals a list, and a bool, an
    int and a float are three different things."""
    if isinstance(one, float) and isinstance(two, float) and math.isnan(one):
        return math.isnan(two)
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(json_equal(one[k], two[k]) for k in one)
    if isinstance(one, list | tuple) and isinstance(two, list | tuple):
        return len(one) == len(two) and all(map(json_equal, one, two))
    return type(one) is type(two) and one == two


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**64 - 1),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=4), inner, max_size=4),
    ),
    max_leaves=20,
)


@given(json_values)
def test_every_store_encodes_any_json_value_exactly(value: Any) -> None:
    """The item text every revisioned store keeps decodes back equal to any JSON value, NaN
    and infinities included."""
    assert json_equal(decode_item(encode_item(value)), value)


LONE = "bytes \udcff\udcfe from surrogateescape"


def surrogate_items() -> list[Any]:
    """Items holding lone surrogates in a value and in keys, one with NaN beside them."""
    return [
        {"type": "function_call_output", "call_id": "c1", "output": LONE},
        {"role": "user", "content": [{"\ud800": "key", "score": float("nan")}]},
        {"role": "assistant", "content": "fine", "meta": {"\udc00\udbffx": [LONE, None]}},
    ]


def assert_surrogate_items(stored: list[Any]) -> None:
    """The items of ``surrogate_items`` as read back: the same surrogates, NaN not null."""
    expected = surrogate_items()
    assert len(stored) == 3
    assert stored[0] == expected[0]
    assert stored[1]["content"][0]["\ud800"] == "key"
    assert math.isnan(stored[1]["content"][0]["score"])
    assert stored[2] == expected[2]


async def test_lone_surrogates_read_back_as_themselves(opener: Opener) -> None:
    """Strings and keys holding lone surrogates are stored as the SDK's sessions keep them
    (JSON escapes) and read back as the same strings, by this and another store object."""
    store = await opener("s")
    await store.add_items(surrogate_items()[:2])
    await store.append_if(surrogate_items()[2:], expected=1, write_id="w", writer="me")
    assert_surrogate_items(await store.get_items())
    assert_surrogate_items(await (await opener("s")).get_items())
    assert (await store.get_items(limit=1)) == surrogate_items()[2:]
    assert await store.pop_item() == surrogate_items()[2]
    assert await store.head() == 3


async def test_a_surrogate_pair_as_two_code_points_is_refused(opener: Opener) -> None:
    """A high and a low surrogate as two code points would read back as one character: the
    item is refused, naming the place, and nothing is written; a lone one is stored."""
    store = await opener("s")
    with pytest.raises(FingerprintError) as caught:
        await store.add_items([item(LONE), {"role": "user", "content": "\ud83d\ude00"}])
    assert caught.value.index == 1
    assert '["content"]' in str(caught.value)
    assert await store.get_items() == []
    assert await store.head() == 0
    await store.add_items([item("\ud83d")])
    assert await store.get_items() == [item("\ud83d")]


@given(
    st.recursive(
        st.one_of(st.none(), st.floats(allow_nan=True), surrogate_text),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(surrogate_text, inner, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_every_store_encodes_lone_surrogates_exactly(value: Any) -> None:
    """The item text every revisioned store keeps decodes back equal to any JSON value whose
    strings and keys may hold lone (low) surrogates."""
    data = encode_item(value)
    assert json_equal(decode_item(data), value)
    assert json_equal(decode_item(data.decode()), value)


# -- what every store's own suite used to check for itself --------------------------------------


async def test_without_migrating_a_missing_schema_is_refused_until_migrated(place: Place) -> None:
    """A store told not to migrate refuses to work on storage without its schema; check() says
    so and creates nothing; migrate() applies it once; then the store works."""
    store = place.store("s", migrate=False)
    if isinstance(store, Unversioned):
        pytest.skip(f"{place.backend.name}: its storage has no schema")
    problem = await store.check()
    assert problem is not None and "migrate" in problem
    with pytest.raises(SchemaMismatch, match="migrate"):
        await store.get_items()
    assert await store.schema_version() is None
    assert await store.migrate() == ["revisioned store schema 1"]
    assert await store.migrate() == []
    assert await store.check() is None
    await store.add_items([item("a")])
    assert await store.get_items() == [item("a")]
    assert await store.schema_version() == 1


async def test_a_newer_schema_is_refused_and_left_alone(place: Place) -> None:
    """Storage stamped with a newer schema version is refused by stores opened afterwards,
    migrating or not (operations and migrate() raise SchemaMismatch; check() says it is
    newer), and its data stays as it was."""
    storage = place.storage()
    first = place.store("s")
    await first.add_items([item("a")])
    await first.close()
    await storage.stamp("store", 2)
    for migrate in (True, False):
        later = place.store("s", migrate=migrate)
        with pytest.raises(SchemaMismatch, match="newer"):
            await later.head()
        with pytest.raises(SchemaMismatch, match="newer"):
            await later.add_items([item("b")])
        with pytest.raises(SchemaMismatch, match="newer"):
            await later.migrate()
        problem = await later.check()
        assert problem is not None and "newer" in problem and "upgrade" in problem
        await later.close()
    assert await place.store("s").schema_version() == 2


async def test_a_closed_store_opens_again_when_used(place: Place) -> None:
    """After close() a store opens what it needs on its next use, and its data is there."""
    store = place.store("s")
    await store.add_items([item("a")])
    await store.close()
    assert await store.get_items() == [item("a")]
    assert await store.append_if([item("b")], expected=1, write_id="w", writer="me") == 2


def test_a_store_works_from_one_event_loop_to_the_next(place: Place) -> None:
    """A store used by successive asyncio.run calls (each closing its loop) keeps working, and
    keeps its data."""
    store = place.store("s")

    async def finish() -> list[Any]:
        items = await store.get_items()
        await store.close()
        return items

    with warnings.catch_warnings():
        # Each loop's connections die with it unclosed, as any asyncio client's do when its
        # loop ends first: collect them here, where their warnings are expected.
        warnings.simplefilter("ignore", ResourceWarning)
        asyncio.run(store.add_items([item("a")]))
        assert asyncio.run(store.head()) == 1
        assert asyncio.run(finish()) == [item("a")]
        gc.collect()


async def test_no_identity_message_or_repr_shows_the_servers_password(place: Place) -> None:
    """A store at an address with a password, on a server nobody listens at: its namespace
    (its identity), its repr, and what check() and a refused operation say name the server
    without the user's password."""
    if not place.backend.server:
        pytest.skip(f"{place.backend.name}: its address holds no credentials")
    secret = "hunter2-not-shown"
    parts = urlsplit(place.address)
    address = urlunsplit(parts._replace(netloc=f"agent:{secret}@127.0.0.1:{closed_port()}"))
    store = place.backend.open_store("s", address, namespace=place.space)
    texts = [repr(store), store.backend_namespace]
    for operation in (store.head, store.check):
        with pytest.raises(Exception) as caught:  # the driver's own: a store translates none
            await operation()
        texts.append(str(caught.value))
    await store.close()
    assert "127.0.0.1" in store.backend_namespace
    for text in texts:
        assert secret not in text and "agent:" not in text
