"""Wrapped, the SDK's own session features behave as unwrapped.

Each test runs one scenario twice on the real runner, over the bare session and over the same
kind of session wrapped in ``ReconcilingSession`` (with ``run_config=session.run_config()``,
as a user writes it), and compares what the SDK did: the calls to ``responses.compact``, the
stored history, the model's input, the run's usage, what a session method was given.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, RunState, function_tool
from agents.memory import OpenAIResponsesCompactionSession, SQLiteSession
from agents.memory.session_settings import SessionSettings
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.usage import Usage

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core.records import Outcome
from agents_reconcile.testing import Fault, FaultInjectingSession

from ..support.sdk import SDK

pytestmark = pytest.mark.asyncio

SECRET = {"role": "user", "content": "my card number is 4111"}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


class FakeCompactClient:
    """Stands in for the OpenAI client: records each ``responses.compact`` call."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.responses = SimpleNamespace(compact=self._compact)

    async def _compact(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        summary = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "summary", "annotations": []}],
        }
        usage = SimpleNamespace(
            input_tokens=7,
            output_tokens=3,
            total_tokens=10,
            input_tokens_details={"cached_tokens": 0, "cache_write_tokens": 0},
            output_tokens_details={"reasoning_tokens": 0},
        )
        return SimpleNamespace(output=[summary], usage=usage)


@dataclasses.dataclass
class Outcomes:
    compact_calls: list[dict[str, Any]]
    stored: list[Any]
    usage: Usage | None
    model_inputs: list[Any]


def _text(item: Any) -> Any:
    return item.get("content") if isinstance(item, dict) else item


async def compaction_run(
    tmp_path: Path,
    *,
    wrapped: bool,
    mode: str,
    history: list[dict[str, Any]],
    hide: dict[str, Any] | None = None,
    streamed: bool = False,
    trigger: Callable[[dict[str, Any]], bool] = lambda _: True,
    snapshots: bool = True,
) -> Outcomes:
    """One turn over a compaction session (over a SQLite file), bare or wrapped.

    ``snapshots``: the store can replace a suffix of its history (the SDK's SQLite session
    can); else it is seen through a plain session that cannot."""
    name = "wrapped" if wrapped else "bare"
    store = SQLiteSession("chat", tmp_path / f"{name}.db")
    await store.add_items(history)
    underlying: Any = store if snapshots else FaultInjectingSession(store)
    client = FakeCompactClient()
    compacting = OpenAIResponsesCompactionSession(
        "chat",
        underlying,
        client=client,  # type: ignore[arg-type]
        compaction_mode=mode,  # type: ignore[arg-type]
        should_trigger_compaction=trigger,
    )
    model = ScriptedModel([[assistant_message("noted")]])
    agent = Agent(name="assistant", model=model)

    def hide_item(data: CallModelData[Any]) -> ModelInputData:
        kept = [item for item in data.model_data.input if _text(item) != _text(hide)]
        return ModelInputData(input=kept, instructions=data.model_data.instructions)

    base = RunConfig(call_model_input_filter=hide_item if hide is not None else None)
    session: Any = compacting
    config = base
    if wrapped:
        session = ReconcilingSession(
            compacting, config=ReconcileConfig(journal=tmp_path / f"{name}-journal.db")
        )
        config = session.run_config(base)
    if streamed:
        result: Any = Runner.run_streamed(agent, "hello", session=session, run_config=config)
        async for _ in result.stream_events():
            pass
    else:
        result = await Runner.run(agent, "hello", session=session, run_config=config)
    stored = await store.get_items()
    return Outcomes(
        client.calls,
        [_text(item) for item in stored],
        result.context_wrapper.usage,
        [[_text(i) for i in call.input] for call in model.calls],
    )


@pytest.mark.parametrize("snapshots", [True, False], ids=["suffix_store", "plain_store"])
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_filter_hiding_a_stored_item_keeps_it_from_compaction(
    tmp_path, streamed, snapshots
):
    """Input mode, with a filter that hides a stored item from the model. Over a store that
    can replace a suffix, the SDK compacts only what the model saw; over one that cannot, it
    does not compact at all. Wrapped, the same: the hidden item never reaches
    ``responses.compact``."""
    history = [SECRET, {"role": "assistant", "content": "stored"}]
    runs = [
        await compaction_run(
            tmp_path,
            wrapped=wrapped,
            mode="input",
            history=history,
            hide=SECRET,
            streamed=streamed,
            snapshots=snapshots,
        )
        for wrapped in (False, True)
    ]
    bare, wrapped = runs
    assert wrapped.compact_calls == bare.compact_calls
    assert wrapped.stored == bare.stored
    if SDK >= (0, 24, 0):
        # Before 0.24.0 the SDK's compaction sends the hidden item too (and compacts it away),
        # bare as wrapped.
        assert bool(bare.compact_calls) is snapshots
        assert _text(SECRET) not in str(wrapped.compact_calls)
        assert _text(SECRET) in wrapped.stored


@pytest.mark.parametrize("mode", ["input", "previous_response_id", "auto"])
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_automatic_compaction_is_the_same_wrapped(tmp_path, mode, streamed):
    """Automatic compaction after a turn: the same compact request (mode, input), the same
    history afterwards, and its usage added to the run's, wrapped as bare."""
    history = [user("earlier"), {"role": "assistant", "content": "reply"}]
    bare = await compaction_run(tmp_path, wrapped=False, mode=mode, history=history)
    wrapped = await compaction_run(tmp_path, wrapped=True, mode=mode, history=history)
    assert bare.compact_calls, "the scenario must compact"
    assert wrapped.compact_calls == bare.compact_calls
    assert wrapped.stored == bare.stored
    assert wrapped.usage is not None and bare.usage is not None
    assert wrapped.usage.total_tokens == bare.usage.total_tokens
    assert wrapped.model_inputs == bare.model_inputs


async def test_compaction_hooks_present_the_inner_signatures(tmp_path):
    """The SDK reads a hook's signature to decide what to pass: the wrapper shows the inner
    method's own, ``wrapper`` included where the inner method declares it."""
    compacting = OpenAIResponsesCompactionSession(
        "chat", SQLiteSession("chat", tmp_path / "s.db"), client=FakeCompactClient()
    )  # type: ignore[arg-type]
    session = ReconcilingSession(compacting, config=ReconcileConfig(journal=tmp_path / "j.db"))
    for name in ("run_compaction", "_get_items_with_generation", "_add_items_with_generation"):
        if not hasattr(compacting, name):
            # A hook the SDK's session of this release does not have is not made up.
            assert not hasattr(session, name), name
            continue
        assert inspect.signature(getattr(session, name)) == inspect.signature(
            getattr(compacting, name)
        ), name


async def test_a_custom_run_compaction_without_wrapper_keeps_working(tmp_path):
    """A custom ``run_compaction(self, args)`` is called as the SDK calls it: no ``wrapper``."""

    class Compacting(SQLiteSession):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.compactions: list[Any] = []

        async def run_compaction(self, args: Any = None) -> None:
            self.compactions.append(args)

    async def run(session: Any, config: RunConfig | None) -> None:
        model = ScriptedModel([[assistant_message("ok")]])
        await Runner.run(Agent(name="a", model=model), "hi", session=session, run_config=config)

    bare = Compacting("chat", tmp_path / "bare.db")
    await run(bare, None)
    inner = Compacting("chat", tmp_path / "wrapped.db")
    session = ReconcilingSession(inner, config=ReconcileConfig(journal=tmp_path / "j.db"))
    await run(session, session.run_config())
    assert inner.compactions == bare.compactions
    assert bare.compactions, "the scenario must compact"


async def test_compaction_resumed_from_a_run_state_is_the_same_wrapped(tmp_path):
    """A turn interrupted for a tool approval, resumed from ``RunState.to_string()``: the
    compaction after the resumed turn is the same wrapped as bare."""

    @function_tool(needs_approval=True)
    def refund(amount: int) -> str:
        return f"refunded {amount}"

    async def scenario(wrapped: bool) -> Outcomes:
        name = "wrapped" if wrapped else "bare"
        store = SQLiteSession("chat", tmp_path / f"{name}.db")
        client = FakeCompactClient()
        compacting = OpenAIResponsesCompactionSession(
            "chat",
            store,
            client=client,
            compaction_mode="input",  # type: ignore[arg-type]
        )
        compacting.should_trigger_compaction = lambda _: True
        session: Any = compacting
        config: RunConfig | None = None
        if wrapped:
            session = ReconcilingSession(
                compacting, config=ReconcileConfig(journal=tmp_path / f"{name}-j.db")
            )
            config = session.run_config()
        model = ScriptedModel(
            [
                [function_call("refund", {"amount": 5}, call_id="c1")],
                [assistant_message("refunded")],
            ]
        )
        agent = Agent(name="a", model=model, tools=[refund])
        first = await Runner.run(agent, "refund me", session=session, run_config=config)
        assert first.interruptions
        state = await RunState.from_string(agent, first.to_state().to_string())
        state.approve(state.get_interruptions()[0])
        result = await Runner.run(agent, state, session=session, run_config=config)
        stored = await store.get_items()
        return Outcomes(
            client.calls,
            [_text(item) for item in stored],
            result.context_wrapper.usage,
            [[_text(i) for i in call.input] for call in model.calls],
        )

    bare = await scenario(False)
    wrapped = await scenario(True)
    # The SDK skips it (the resumed run's generation is not the session's): so must the
    # wrapper, where a forwarder that lost ``wrapper=`` compacted all of the history.
    assert wrapped.compact_calls == bare.compact_calls
    assert wrapped.stored == bare.stored
    assert wrapped.model_inputs == bare.model_inputs


# -- the history limit --------------------------------------------------------------------


async def test_a_history_limit_prunes_orphaned_tool_outputs_as_bare(tmp_path):
    """``SessionSettings(limit=...)`` that cuts a tool call off from its output: the SDK drops
    the orphaned output from the model's input (the Responses API refuses it); wrapped, the
    model sees the same input."""
    history: list[Any] = [
        user("refund me"),
        {"type": "function_call", "call_id": "c1", "name": "refund", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "refunded"},
        {"role": "assistant", "content": "done"},
    ]

    async def scenario(wrapped: bool) -> list[Any]:
        name = "wrapped" if wrapped else "bare"
        store = SQLiteSession("chat", tmp_path / f"{name}.db")
        await store.add_items(history)
        base = RunConfig(session_settings=SessionSettings(limit=2))
        session: Any = store
        config = base
        if wrapped:
            session = ReconcilingSession(
                store, config=ReconcileConfig(journal=tmp_path / f"{name}-j.db")
            )
            config = session.run_config(base)
        model = ScriptedModel([[assistant_message("ok")]])
        await Runner.run(Agent(name="a", model=model), "again", session=session, run_config=config)
        return list(model.calls[0].input)

    bare = await scenario(False)
    wrapped = await scenario(True)
    assert not any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in bare), (
        "the SDK prunes the orphaned output"
    )
    assert wrapped == bare


async def test_a_callback_of_the_callers_own_still_decides_the_input(tmp_path):
    """With a ``session_input_callback`` of the caller's, the SDK does not prune: neither does
    the wrapper, and the callback sees the same history and new input."""
    seen: list[Any] = []

    def callback(history: list[Any], new_input: list[Any]) -> list[Any]:
        seen.append(([_text(i) for i in history], [_text(i) for i in new_input]))
        return history + new_input

    async def scenario(wrapped: bool) -> list[Any]:
        name = "wrapped" if wrapped else "bare"
        store = SQLiteSession("chat", tmp_path / f"{name}.db")
        await store.add_items([user("one"), {"role": "assistant", "content": "two"}])
        base = RunConfig(session_input_callback=callback)
        session: Any = store
        config = base
        if wrapped:
            session = ReconcilingSession(
                store, config=ReconcileConfig(journal=tmp_path / f"{name}-j.db")
            )
            config = session.run_config(base)
        model = ScriptedModel([[assistant_message("ok")]])
        await Runner.run(Agent(name="a", model=model), "three", session=session, run_config=config)
        return [_text(i) for i in model.calls[0].input]

    assert await scenario(True) == await scenario(False)
    assert seen[0] == seen[1]


async def test_no_callback_is_installed_when_retried_input_is_not_merged(tmp_path):
    """``merge_retried_input=False``: the wrapper has no reason to shape the input, so the
    RunConfig keeps the caller's callback (or none)."""
    session = ReconcilingSession(
        SQLiteSession("chat", tmp_path / "s.db"),
        config=ReconcileConfig(journal=tmp_path / "j.db", merge_retried_input=False),
    )
    assert session.run_config().session_input_callback is None
    assert session.run_config().call_model_input_filter is not None


# -- how the inner session's methods are called -------------------------------------------


class _Recording:
    """A session recording the keyword arguments each method was given."""

    def __init__(self) -> None:
        self.session_id = "chat"
        self.items: list[Any] = []
        self.kwargs: dict[str, list[set[str]]] = {}

    def _note(self, name: str, kwargs: dict[str, Any]) -> None:
        self.kwargs.setdefault(name, []).append(set(kwargs))


class PartlyContextAware(_Recording):
    """``wrapper`` on two of the four history methods: a legacy session to the SDK."""

    async def get_items(self, limit: int | None = None, **kwargs: Any) -> list[Any]:
        self._note("get_items", kwargs)
        return list(self.items) if not limit else self.items[-limit:]

    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        self._note("add_items", {"wrapper": wrapper} if wrapper is not None else {})
        self.items.extend(items)

    async def pop_item(self) -> Any:
        return self.items.pop() if self.items else None

    async def clear_session(self) -> None:
        self.items.clear()


class _Unsignable:
    """A callable whose signature cannot be read (``inspect.signature`` raises)."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self._function = function

    @property
    def __signature__(self) -> Any:
        raise RuntimeError("no signature here")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._function(*args, **kwargs)


class SignatureLess(_Recording):
    """History methods whose signatures cannot be inspected: legacy to the SDK."""

    def __init__(self) -> None:
        super().__init__()
        self.get_items = _Unsignable(self._get)
        self.add_items = _Unsignable(self._add)
        self.pop_item = _Unsignable(self._pop)
        self.clear_session = _Unsignable(self._clear)

    async def _get(self, limit: int | None = None, **kwargs: Any) -> list[Any]:
        self._note("get_items", kwargs)
        return list(self.items) if not limit else self.items[-limit:]

    async def _add(self, items: list[Any], **kwargs: Any) -> None:
        self._note("add_items", kwargs)
        self.items.extend(items)

    async def _pop(self, **kwargs: Any) -> Any:
        return self.items.pop() if self.items else None

    async def _clear(self, **kwargs: Any) -> None:
        self.items.clear()


@pytest.mark.parametrize("kind", [PartlyContextAware, SignatureLess])
async def test_a_legacy_session_is_called_as_the_sdk_calls_it(tmp_path, kind):
    """A session the SDK treats as legacy (``wrapper`` on some methods only, or signatures
    that cannot be read) is built and called without ``wrapper``, as the SDK calls it."""
    bare = kind()
    model = ScriptedModel([[assistant_message("ok")]])
    await Runner.run(Agent(name="a", model=model), "hi", session=bare)

    inner = kind()
    session = ReconcilingSession(inner, config=ReconcileConfig(journal=tmp_path / "j.db"))
    model = ScriptedModel([[assistant_message("ok")]])
    await Runner.run(
        Agent(name="a", model=model), "hi", session=session, run_config=session.run_config()
    )
    assert inner.items == bare.items
    assert all("wrapper" not in given for given in inner.kwargs["add_items"])
    assert all("wrapper" not in given for given in inner.kwargs["get_items"])
    assert inner.kwargs["add_items"] == bare.kwargs["add_items"]


# -- periodic content ---------------------------------------------------------------------


async def test_a_lost_acknowledgement_over_repeating_content_is_committed(tmp_path):
    """History that repeats (a, b, c, a, b, c) and a lost acknowledgement of another (a, b, c):
    the wrapper knows the whole history it appended to, so the write reads one way only and
    is settled as committed on the next run, not denied."""
    pattern = [user("a"), {"role": "assistant", "content": "b"}, user("c")]
    store = SQLiteSession("chat", tmp_path / "s.db")
    faulty = FaultInjectingSession(store)
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=tmp_path / "j.db"))
    await session.add_items(pattern + pattern)
    await session.get_items()  # a fresh run reads the history it builds on
    faulty.plan(Fault.LOST_ACK)
    with pytest.raises(ConnectionError):
        await session.add_items(list(pattern))

    model = ScriptedModel([[assistant_message("ok")]])
    await Runner.run(
        Agent(name="a", model=model), "next", session=session, run_config=session.run_config()
    )
    decisions = await session.decisions()
    assert [d.outcome for d in decisions] == [Outcome.COMMITTED]
    stored = [_text(item) for item in await store.get_items()]
    assert stored[:10] == ["a", "b", "c"] * 3 + ["next"] and len(stored) == 11


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_wrapper_under_a_compaction_session_keeps_suffix_compaction(tmp_path, streamed):
    """``OpenAIResponsesCompactionSession`` over a wrapped SQLite session: the store's suffix
    snapshot reaches the compaction session through the wrapper, so it compacts what the
    model saw, as over the bare store (and the wrapper forgets the tail it remembered)."""

    async def scenario(wrapped: bool) -> Outcomes:
        name = "wrapped" if wrapped else "bare"
        store = SQLiteSession("chat", tmp_path / f"{name}.db")
        await store.add_items([SECRET, {"role": "assistant", "content": "stored"}])
        underlying: Any = store
        if wrapped:
            underlying = ReconcilingSession(
                store, config=ReconcileConfig(journal=tmp_path / f"{name}-j.db")
            )
        client = FakeCompactClient()
        compacting = OpenAIResponsesCompactionSession(
            "chat",
            underlying,
            client=client,  # type: ignore[arg-type]
            compaction_mode="input",
            should_trigger_compaction=lambda _: True,
        )
        model = ScriptedModel([[assistant_message("noted")]])

        def hide(data: CallModelData[Any]) -> ModelInputData:
            kept = [i for i in data.model_data.input if _text(i) != _text(SECRET)]
            return ModelInputData(input=kept, instructions=data.model_data.instructions)

        config = RunConfig(call_model_input_filter=hide)
        agent = Agent(name="a", model=model)
        if streamed:
            result: Any = Runner.run_streamed(agent, "hello", session=compacting, run_config=config)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, "hello", session=compacting, run_config=config)
        return Outcomes(
            client.calls,
            [_text(item) for item in await store.get_items()],
            result.context_wrapper.usage,
            [[_text(i) for i in call.input] for call in model.calls],
        )

    bare = await scenario(False)
    wrapped = await scenario(True)
    assert bare.compact_calls, "the scenario must compact"
    assert wrapped.compact_calls == bare.compact_calls
    assert wrapped.stored == bare.stored
