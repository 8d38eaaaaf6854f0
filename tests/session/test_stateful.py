"""Model-based stateful test of ``ReconcilingSession`` over a real SQLite file and journal.

The machine drives ``ReconcilingSession(FaultInjectingSession(SQLiteSession(file)))`` with an
``SQLiteJournal`` file, both in a temporary directory, through random sequences of appends
(clean, or failing in each ``Fault`` mode, also while the settling replay runs), reads,
reconciles, process restarts, another worker's appends and operator repairs, and checks every
step against a model. ``verify_tail`` (re-read before every append) is drawn per run.

The model
---------
Every fault is deterministic, so the model knows exactly what the store holds after each step
(``expected``), which items were acknowledged to the caller (``acked``), and, for the one write
whose outcome the caller does not know (``pending``), what really landed. For that write it
predicts the verdict of the rule in DESIGN.md ("The rule") from first principles:

* the intent's ``before`` is the last ``k = len(batch) + 1`` items of the history at the time of
  the append, and ``before_is_whole`` is ``len(history) <= k``. One allowance: when the history
  holds exactly ``k`` items, a read of ``k`` items cannot prove nothing is older, so the wrapper
  may record ``False`` (the more cautious reading). Or, when the wrapper remembers the whole
  history (at most ``KEPT_DIGESTS`` items), ``before`` is all of it and whole; any other
  deviation fails the test;
* a reading "the first ``h`` items of the batch landed" (``h = 0`` is UNCHANGED, ``h = len(batch)``
  COMMITTED, anything between a partial write) fits the store when the store ends with
  ``before + batch[:h]``, or, when ``before`` was the whole history, *is* exactly that;
* exactly one fitting reading gives COMMITTED (never replayed), UNCHANGED (replayed once) or
  AMBIGUOUS/``partial_commit``; two or more readings that include COMMITTED or UNCHANGED (repeated
  content) give AMBIGUOUS/``indistinguishable``; several partial readings only, still
  ``partial_commit``; none (a concurrent writer's item on top) gives AMBIGUOUS/``history_changed``.

Because the model also knows the truth, it checks that the rule is sound on every state the
machine reaches: the true reading always fits, so a clean verdict is always the truth.

A retried batch is modelled too (DESIGN.md, "Retried input"): an ``add_items`` whose batch
equals the one this wrapper just settled, while the history still ends with it, is merged with
it and not written again; a restart, or anyone's append, ends that window.

Regressions
-----------
The examples Hypothesis printed for the two bugs this machine found (a failed replay left the
remembered tail vouched for; a retried batch was merged against a stale tail after another
worker's append) are kept as plain tests at the end of the file, with a direct test of the
duplicate the first one could cause.

Run it longer with ``AGENTS_RECONCILE_STATEFUL_PROFILE=stateful-thorough``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from agents import SQLiteSession
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from agents_reconcile import (
    Action,
    ContinuationDenied,
    Decision,
    IntentState,
    Outcome,
    Reason,
    ReconcileConfig,
    ReconcilingSession,
    SQLiteJournal,
)
from agents_reconcile._core.fingerprint import item_digest
from agents_reconcile._session.claims import PROCESS_IN_FLIGHT
from agents_reconcile._session.state import KEPT_DIGESTS
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

Item = dict[str, str]
_T = TypeVar("_T")

SESSION_ID = "stateful"
HANG_TIMEOUT = 0.02
"""How long ``asyncio.wait_for`` gives an append that is known to hang before cancelling it."""

settings.register_profile(
    "stateful-ci",
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "stateful-dev",
    max_examples=15,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "stateful-thorough",
    max_examples=1000,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
PROFILE = os.environ.get("AGENTS_RECONCILE_STATEFUL_PROFILE", "stateful-ci")

# A clean append is as likely as all failure modes together.
APPEND_FAULTS = st.sampled_from(
    [
        None,
        None,
        None,
        None,
        None,
        Fault.REJECT,
        Fault.LOST_ACK,
        Fault.PARTIAL,
        Fault.CONCURRENT_WRITER,
        Fault.HANG,
    ]
)
# A replay that hangs keeps its claim on the intent until it ends (by design, so that nobody
# replays it twice), which a fault that never ends turns into a session blocked for good.
REPLAY_FAULTS = st.sampled_from(
    [Fault.REJECT, Fault.LOST_ACK, Fault.PARTIAL, Fault.CONCURRENT_WRITER]
)
BATCH_SIZES = st.integers(min_value=1, max_value=3)
PARTIAL_ITEMS = st.integers(min_value=0, max_value=3)
COPY_BACKS = st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=3)


# -- the model -------------------------------------------------------------------------------


@dataclass
class ModelIntent:
    """The write whose outcome the caller does not know, as the model sees it."""

    intent_id: str
    batch: list[Item]
    before: list[Item]
    whole: bool
    landed: int | None
    """How many of the batch's first items the store holds on top of ``before``; ``None`` when
    another writer's item landed instead."""


@dataclass(frozen=True)
class Prediction:
    """The verdict the rule must reach for the pending intent on the current history."""

    outcome: Outcome
    reason: Reason

    @property
    def denied(self) -> bool:
        return self.outcome is Outcome.AMBIGUOUS


def _fits(history: list[Item], expected: list[Item], whole: bool) -> bool:
    if whole:
        return history == expected
    return len(history) >= len(expected) and history[len(history) - len(expected) :] == expected


def predict(history: list[Item], intent: ModelIntent) -> Prediction:
    """The rule of DESIGN.md applied to ``intent`` on ``history``, checked against the truth."""
    size = len(intent.batch)
    fitting = [
        landed
        for landed in range(size + 1)
        if _fits(history, intent.before + intent.batch[:landed], intent.whole)
    ]
    # Soundness on this state: the true reading always fits, and a foreign item on top makes
    # every reading fail; so a single fitting reading can only be the truth.
    if intent.landed is None:
        assert not fitting, f"a reading {fitting} fits although another writer's item landed"
    else:
        assert intent.landed in fitting, "the true reading does not fit the store"
    committed, unchanged = size in fitting, 0 in fitting
    partial = [landed for landed in fitting if 0 < landed < size]
    if committed + unchanged + bool(partial) > 1:
        return Prediction(Outcome.AMBIGUOUS, Reason.INDISTINGUISHABLE)
    if committed:
        return Prediction(Outcome.COMMITTED, Reason.BATCH_PRESENT)
    if unchanged:
        return Prediction(Outcome.UNCHANGED, Reason.BATCH_ABSENT)
    if partial:
        return Prediction(Outcome.AMBIGUOUS, Reason.PARTIAL_COMMIT)
    return Prediction(Outcome.AMBIGUOUS, Reason.HISTORY_CHANGED)


def _key(item: Any) -> str:
    return json.dumps(item, sort_keys=True)


def _is_subsequence(needle: list[Item], haystack: list[Item]) -> bool:
    remaining = iter(haystack)
    return all(any(item == candidate for candidate in remaining) for item in needle)


def _digests(items: list[Item], *, ignore_ids: bool) -> tuple[str, ...]:
    return tuple(item_digest(item, ignore_ids=ignore_ids) for item in items)


def _event(label: str) -> None:
    # Coverage labels (hypothesis.event); a replayed example runs outside any test.
    if currently_in_test_context():
        event(label)


# -- the machine -----------------------------------------------------------------------------


class ReconcileMachine(RuleBasedStateMachine):
    """Drives one session (one event loop, one temporary directory) and its model."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.directory = Path(tempfile.mkdtemp(prefix="agents-reconcile-stateful-"))
        self.db_path = self.directory / "chat.db"
        self.journal_path = self.directory / "journal.db"
        # Separate observers of the files: what is durable, not what the app remembers.
        self.observer = SQLiteSession(SESSION_ID, self.db_path)
        self.observer_journal = SQLiteJournal(self.journal_path)
        self.raw = sqlite3.connect(self.db_path, isolation_level=None)
        self.verify_tail = False
        self.app: tuple[SQLiteSession, SQLiteJournal] | None = None
        self.expected: list[Item] = []
        self.acked: list[Item] = []
        self.pending: ModelIntent | None = None
        self.last_settled: list[Item] | None = None
        self.last_failed: list[Item] | None = None
        self.seen: list[Item] = []
        self.counter = 0
        self.foreign_counter = 0
        self.planned_foreign: Item = {}

    # -- plumbing --------------------------------------------------------------------------

    def open_app(self) -> None:
        store = SQLiteSession(SESSION_ID, self.db_path)
        journal = SQLiteJournal(self.journal_path)
        self.app = (store, journal)
        self.faulty = FaultInjectingSession(store)
        # A cancelled caller's write is waited out for in_flight_wait before its intent is
        # marked cancelled: kept short, the hung appends below wait for it.
        config = ReconcileConfig(journal=journal, in_flight_wait=0.1, verify_tail=self.verify_tail)
        self.session = ReconcilingSession(self.faulty, config=config)

    def close_app(self) -> None:
        if self.app is not None:
            store, journal = self.app
            self.app = None
            store.close()
            self.run(journal.close())

    def run(self, operation: Coroutine[Any, Any, _T]) -> _T:
        return self.loop.run_until_complete(operation)

    def attempt(self, operation: Coroutine[Any, Any, _T]) -> tuple[_T | None, BaseException | None]:
        """Run ``operation``; return its result or the exception it raised (not assertions)."""
        try:
            return self.run(operation), None
        except AssertionError:
            raise
        except Exception as exc:
            return None, exc

    def teardown(self) -> None:
        try:
            self.close_app()
            self.observer.close()
            self.run(self.observer_journal.close())
            self.raw.close()
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
        finally:
            self.loop.close()
            shutil.rmtree(self.directory, ignore_errors=True)

    def stored(self) -> list[Item]:
        items: list[Item] = self.run(self.observer.get_items())
        return items

    def raw_rows(self) -> tuple[list[Any], list[Any]]:
        """The session's rows exactly as the file holds them."""
        messages = self.raw.execute(
            "SELECT id, session_id, message_data, created_at FROM agent_messages ORDER BY id"
        ).fetchall()
        sessions = self.raw.execute(
            "SELECT session_id, created_at, updated_at FROM agent_sessions ORDER BY session_id"
        ).fetchall()
        return messages, sessions

    def journal_entries(self) -> list[Any]:
        entries: list[Any] = self.run(self.observer_journal.pending(SESSION_ID))
        return entries

    def fresh(self) -> Item:
        self.counter += 1
        item = {"role": "user", "content": f"m{self.counter}"}
        self.seen.append(item)
        return item

    def foreign(self) -> Item:
        self.foreign_counter += 1
        item = {"role": "user", "content": f"foreign-{self.foreign_counter}"}
        self.seen.append(item)
        return item

    def prediction(self) -> Prediction | None:
        return None if self.pending is None else predict(self.expected, self.pending)

    def replay_expected(self) -> bool:
        found = self.prediction()
        return found is not None and found.outcome is Outcome.UNCHANGED

    def stuck(self) -> bool:
        found = self.prediction()
        return found is not None and found.denied

    # -- shared expectations ---------------------------------------------------------------

    def check_denial(
        self, error: BaseException | None, expected: Prediction, rows: tuple[Any, Any]
    ) -> None:
        """A denial names the pending intent and its predicted reason, and writes nothing."""
        assert self.pending is not None
        assert isinstance(error, ContinuationDenied), (
            f"expected ContinuationDenied ({expected.reason.value}), got {error!r}"
        )
        assert error.decision.outcome is Outcome.AMBIGUOUS
        assert error.decision.reason is expected.reason, (
            f"denied for {error.decision.reason.value}, the model says {expected.reason.value}"
        )
        assert error.intent_id == self.pending.intent_id
        assert self.raw_rows() == rows, "a denial changed the stored history"
        (entry,) = self.journal_entries()
        assert entry.intent.intent_id == self.pending.intent_id
        assert entry.state in (IntentState.FAILED, IntentState.CANCELLED)
        _event(f"denied: {expected.reason.value}")

    def settle_in_model(self, expected: Prediction) -> None:
        """What a clean settlement of the pending intent does to the model."""
        assert self.pending is not None and not expected.denied
        if expected.outcome is Outcome.UNCHANGED:
            self.expected.extend(copy.deepcopy(self.pending.batch))
        self.last_settled = self.pending.batch
        self.pending = None
        _event(f"settled: {expected.outcome.value}")

    def record_failure(
        self, error: BaseException | None, batch: list[Item], fault: Fault, landed: list[Item]
    ) -> None:
        """A failed append leaves exactly one intent, for this batch, over the right tail."""
        history = self.expected
        if fault is Fault.HANG:
            assert isinstance(error, TimeoutError), f"a hung append ended with {error!r}"
        else:
            assert isinstance(error, BackendFailure), f"expected the backend's error: {error!r}"
        (entry,) = self.journal_entries()
        intent = entry.intent
        assert entry.state is (IntentState.CANCELLED if fault is Fault.HANG else IntentState.FAILED)
        if fault is not Fault.HANG:
            assert any(intent.intent_id in note for note in getattr(error, "__notes__", ()))
        assert list(intent.batch) == batch
        k = len(batch) + 1
        if intent.before_is_whole and len(intent.before_digests) == len(history) > k:
            # The wrapper remembered the whole history (at most KEPT_DIGESTS items) and
            # recorded all of it.
            assert len(history) <= KEPT_DIGESTS, "a whole history longer than the memory"
            before = history
            _event("before recorded as the whole remembered history")
        else:
            before = history[-k:]
            whole = len(history) <= k
            allowed = {whole, False} if len(history) == k else {whole}
            assert intent.before_is_whole in allowed, (
                f"before_is_whole={intent.before_is_whole} with {len(history)} items and k={k}"
            )
            if intent.before_is_whole != whole:
                _event("before recorded as not whole (history of exactly k items)")
        assert intent.before_digests == _digests(before, ignore_ids=intent.ignore_ids), (
            "the intent does not record the items that preceded the write"
        )
        if fault is Fault.CONCURRENT_WRITER:
            count: int | None = None
        else:
            count = len(landed)
            assert landed == batch[:count]
        self.pending = ModelIntent(
            intent.intent_id, batch, before, intent.before_is_whole, landed=count
        )
        self.expected = history + copy.deepcopy(landed)

    def plan(self, fault: Fault, batch_size: int, partial: int, at: int) -> None:
        """Arm ``fault`` for the ``at``-th inner append from now (a concurrent writer gets a
        new foreign item, kept in ``planned_foreign``)."""
        options: dict[str, Any] = {}
        if fault is Fault.PARTIAL:
            options["partial_items"] = min(partial, batch_size)
        if fault is Fault.CONCURRENT_WRITER:
            self.planned_foreign = self.foreign()
            options["foreign_items"] = [copy.deepcopy(self.planned_foreign)]
        self.faulty.plan(fault, at=at, **options)

    def landed_by(self, fault: Fault, batch: list[Item], partial: int) -> list[Item]:
        if fault is Fault.LOST_ACK:
            return list(batch)
        if fault is Fault.PARTIAL:
            return batch[: min(partial, len(batch))]
        if fault is Fault.CONCURRENT_WRITER:
            return [self.planned_foreign]
        return []

    async def add_and_cancel_when_hung(self, batch: list[Item]) -> None:
        """Start the append, wait until it is really hanging, then let ``wait_for`` cancel it."""
        fired = len(self.faulty.faults_fired)
        task = asyncio.ensure_future(self.session.add_items(batch))
        deadline = time.monotonic() + 10
        while len(self.faulty.faults_fired) == fired and not task.done():
            assert time.monotonic() < deadline, "the append neither hung nor finished"
            await asyncio.sleep(0.001)
        hung: str | None = None
        if not task.done():
            # The hang must be this batch's own append, never a replay.
            entries = await self.observer_journal.pending(SESSION_ID)
            assert [list(e.intent.batch) for e in entries] == [batch], (
                "the hang was not the new batch's append"
            )
            assert entries[0].state is IntentState.IN_FLIGHT
            hung = entries[0].intent.intent_id
        try:
            await asyncio.wait_for(task, timeout=HANG_TIMEOUT)
        finally:
            # The hung write outlives its caller, its intent held, until in_flight_wait ran out;
            # the process lets it go once the write's task ended, a moment after the journal
            # says so, and settles what it left under the session's lock (a slow machine makes
            # the moment longer than in_flight_wait).
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and (  # noqa: ASYNC110 - the journal is polled
                any(
                    e.state is IntentState.IN_FLIGHT
                    for e in await self.observer_journal.pending(SESSION_ID)
                )
                or (hung is not None and PROCESS_IN_FLIGHT.holds(hung))
                # What the write's end set going (its settling, under the session's lock).
                or self.session._lock._lock().locked()
            ):
                await asyncio.sleep(0.01)

    # -- start -----------------------------------------------------------------------------

    @initialize(seed=st.lists(st.sampled_from("ab"), max_size=5), verify_tail=st.booleans())
    def start(self, seed: list[str], verify_tail: bool) -> None:
        """Start the app over a short history from a two-item vocabulary (repeats are common)."""
        self.verify_tail = verify_tail
        self.open_app()
        items = [{"role": "user", "content": f"seed-{letter}"} for letter in seed]
        if items:
            self.run(self.session.add_items(copy.deepcopy(items)))
        self.expected = copy.deepcopy(items)
        self.acked = copy.deepcopy(items)
        self.seen.extend(items)

    # -- appends ---------------------------------------------------------------------------

    async def quiet(self) -> None:
        """Let what the steps before set going in the background end (replays whose caller was
        cancelled, clearings, the settling after a hung write), within a bound: a clean append
        is then never kept waiting on them, and the model's prediction of what it settles first
        (a replay, or nothing) is the process's own."""
        loop = asyncio.get_running_loop()
        # Waited for until it is so (a loaded machine takes longer, never a different path);
        # the bound only keeps a hang from running for ever.
        deadline = time.monotonic() + 60
        while (
            # Only this machine's loop: a task left on a loop another test closed never ends.
            any(
                not task.done() and task.get_loop() is loop
                for task in list(PROCESS_IN_FLIGHT.background)
            )
            or self.session._lock._lock().locked()
        ):
            assert time.monotonic() < deadline, "the process did not come to rest"
            await asyncio.sleep(0.01)

    def append(self, batch: list[Item], fault: Fault | None, partial: int) -> None:
        self.run(self.quiet())
        rows = self.raw_rows()
        fired = len(self.faulty.faults_fired)
        expected = self.prediction()
        replays = expected is not None and expected.outcome is Outcome.UNCHANGED
        if fault is not None:
            # Settling first replays a missing batch: that is the first inner append then.
            self.plan(fault, len(batch), partial, at=2 if replays else 1)
        try:
            if fault is Fault.HANG:
                _, error = self.attempt(self.add_and_cancel_when_hung(copy.deepcopy(batch)))
            else:
                _, error = self.attempt(self.session.add_items(copy.deepcopy(batch)))
        finally:
            self.faulty.clear()
        if expected is not None and expected.denied:
            self.check_denial(error, expected, rows)
            assert len(self.faulty.faults_fired) == fired, "an inner append ran after a denial"
            return
        if expected is not None:
            self.settle_in_model(expected)
        if self.last_settled is not None and batch == self.last_settled:
            # Retried input: merged with the write just settled, stored once.
            assert error is None, f"a retried batch raised {error!r}"
            self.acked.extend(batch)
            self.last_settled = None
            _event("retried batch merged")
            return
        self.last_settled = None
        if fault is None:
            assert error is None, f"a clean append raised {error!r}"
            assert not self.journal_entries(), "an acknowledged append left its intent"
            self.expected = self.expected + copy.deepcopy(batch)
            self.acked.extend(batch)
            return
        assert len(self.faulty.faults_fired) == fired + 1, "the planned fault did not fire"
        self.record_failure(error, batch, fault, self.landed_by(fault, batch, partial))
        self.last_failed = batch
        _event(f"append failed: {fault.value}")

    @rule(size=BATCH_SIZES, fault=APPEND_FAULTS, partial=PARTIAL_ITEMS)
    def append_fresh(self, size: int, fault: Fault | None, partial: int) -> None:
        """Append 1-3 new items, cleanly or failing in one of the fault modes."""
        self.append([self.fresh() for _ in range(size)], fault, partial)

    @precondition(lambda self: bool(self.seen))
    @rule(backs=COPY_BACKS, fault=APPEND_FAULTS, partial=PARTIAL_ITEMS)
    def append_repeat(self, backs: list[int], fault: Fault | None, partial: int) -> None:
        """Append a batch holding at least one copy of an earlier item (newest most likely)."""
        batch: list[Item] = []
        for position, back in enumerate(backs):
            # 0 is a new item, n a copy of the n-th newest item so far; never all new.
            if back == 0 and (position > 0 or any(backs)):
                batch.append(self.fresh())
            else:
                pool = self.seen + batch
                batch.append(copy.deepcopy(pool[-min(max(back, 1), len(pool))]))
        self.append(batch, fault, partial)

    @precondition(lambda self: bool(self.expected))
    @rule(size=BATCH_SIZES, same=st.booleans(), fault=APPEND_FAULTS, partial=PARTIAL_ITEMS)
    def append_echo(self, size: int, same: bool, fault: Fault | None, partial: int) -> None:
        """Append the newest stored item ``size`` times, or the newest ``size`` items again."""
        batch = [self.expected[-1]] * size if same else self.expected[-size:]
        self.append(copy.deepcopy(batch), fault, partial)

    @precondition(lambda self: self.last_failed is not None)
    @rule(fault=APPEND_FAULTS, partial=PARTIAL_ITEMS)
    def retry_failed_batch(self, fault: Fault | None, partial: int) -> None:
        """Send the batch of the last failed append again, as a caller retrying it would."""
        assert self.last_failed is not None
        self.append(copy.deepcopy(self.last_failed), fault, partial)

    @precondition(lambda self: self.replay_expected())
    @rule(size=BATCH_SIZES, fault=REPLAY_FAULTS, partial=PARTIAL_ITEMS)
    def append_while_replay_fails(self, size: int, fault: Fault, partial: int) -> None:
        """An append whose settling replay fails raises the backend's error, writing nothing new."""
        assert self.pending is not None
        batch = [self.fresh() for _ in range(size)]
        self.plan(fault, len(self.pending.batch), partial, at=1)
        try:
            _, error = self.attempt(self.session.add_items(copy.deepcopy(batch)))
        finally:
            self.faulty.clear()
        self.replay_failed(error, fault, partial)

    @rule(size=BATCH_SIZES)
    def other_worker_appends(self, size: int) -> None:
        """Another worker (its own wrapper, store and journal objects on the same files)
        settles what is pending the same way, then appends new items."""
        rows = self.raw_rows()
        expected = self.prediction()
        batch = [self.fresh() for _ in range(size)]
        store = SQLiteSession(SESSION_ID, self.db_path)
        journal = SQLiteJournal(self.journal_path)
        config = ReconcileConfig(journal=journal, in_flight_wait=0.5)
        try:
            worker = ReconcilingSession(store, config=config)
            _, error = self.attempt(worker.add_items(copy.deepcopy(batch)))
        finally:
            store.close()
            self.run(journal.close())
        if expected is not None and expected.denied:
            self.check_denial(error, expected, rows)
            return
        assert error is None, f"another worker's append raised {error!r}"
        if expected is not None:
            self.settle_in_model(expected)
        # The history no longer ends with anything this wrapper settled.
        self.last_settled = None
        self.expected = self.expected + copy.deepcopy(batch)
        self.acked.extend(batch)
        _event("another worker appended")

    # -- reads and reconciliation ----------------------------------------------------------

    def replay_failed(self, error: BaseException | None, fault: Fault, partial: int) -> None:
        """A failed replay leaves the same intent pending; the store holds what it wrote."""
        assert self.pending is not None
        assert isinstance(error, BackendFailure), f"a failing replay ended with {error!r}"
        (entry,) = self.journal_entries()
        assert entry.intent.intent_id == self.pending.intent_id
        assert entry.state is IntentState.FAILED
        landed = self.landed_by(fault, self.pending.batch, partial)
        self.pending.landed = None if fault is Fault.CONCURRENT_WRITER else len(landed)
        self.expected = self.expected + copy.deepcopy(landed)
        _event(f"replay failed: {fault.value}")

    @rule()
    def reconcile(self) -> None:
        """``reconcile()`` settles a clean intent as predicted and denies an ambiguous one."""
        rows = self.raw_rows()
        expected = self.prediction()
        decisions, error = self.attempt(self.session.reconcile())
        if expected is None:
            assert error is None and decisions == [], (error, decisions)
            return
        if expected.denied:
            self.check_denial(error, expected, rows)
            return
        assert self.pending is not None
        assert error is None, f"a clean reconcile raised {error!r}"
        assert decisions is not None and len(decisions) == 1
        (decision,) = decisions
        assert isinstance(decision, Decision)
        assert decision.intent_id == self.pending.intent_id
        assert (decision.outcome, decision.reason) == (expected.outcome, expected.reason)
        replayed = expected.outcome is Outcome.UNCHANGED
        assert decision.action is (Action.REPLAYED if replayed else Action.SETTLED)
        assert self.run(self.observer_journal.is_settled(self.pending.intent_id))
        self.settle_in_model(expected)
        assert self.run(self.session.pending()) == [], "an intent is pending after reconcile"
        assert not self.journal_entries(), "the journal holds an intent after reconcile"
        assert self.stored() == self.expected

    @precondition(lambda self: self.replay_expected())
    @rule(fault=REPLAY_FAULTS, partial=PARTIAL_ITEMS)
    def reconcile_while_replay_fails(self, fault: Fault, partial: int) -> None:
        """A replay that fails inside ``reconcile()`` leaves the intent pending for the next try."""
        assert self.pending is not None
        self.plan(fault, len(self.pending.batch), partial, at=1)
        try:
            _, error = self.attempt(self.session.reconcile())
        finally:
            self.faulty.clear()
        self.replay_failed(error, fault, partial)

    @rule()
    def read(self) -> None:
        """``get_items()`` settles first, then returns exactly the modelled history."""
        rows = self.raw_rows()
        expected = self.prediction()
        items, error = self.attempt(self.session.get_items())
        if expected is not None and expected.denied:
            self.check_denial(error, expected, rows)
            return
        assert error is None, f"a read raised {error!r}"
        if expected is not None:
            self.settle_in_model(expected)
        assert items == self.expected, "get_items() disagrees with the model"
        assert not self.journal_entries(), "the journal holds an intent after a read"

    # -- the world around the app ------------------------------------------------------------

    @rule()
    def restart(self) -> None:
        """Drop the app and build it again over new objects on the same files."""
        self.close_app()
        self.open_app()
        self.last_settled = None

    def operator_settles(self, resolution: str) -> None:
        """Resolve the stuck intent as an operator would (see the three rules below)."""
        assert self.pending is not None
        pending = self.pending
        expected = predict(self.expected, pending)
        missing = pending.batch[pending.landed or 0 :]
        journal = SQLiteJournal(self.journal_path)
        try:
            (entry,) = self.run(journal.pending(SESSION_ID))
            assert entry.intent.intent_id == pending.intent_id
            backend = entry.intent.backend
            if resolution != "accept":
                store = SQLiteSession(SESSION_ID, self.db_path)
                try:
                    if resolution == "reset":
                        self.run(store.clear_session())
                    else:
                        self.run(store.add_items(copy.deepcopy(missing)))
                finally:
                    store.close()
                # A write behind the wrappers' backs is counted through the journal API, so
                # that every running wrapper's memory of the tail expires (config.verify_tail).
                self.run(journal.count_write(SESSION_ID, backend))
            if resolution == "reset":
                self.run(journal.discard(entry.intent.intent_id))
            else:
                decision = Decision(
                    intent_id=entry.intent.intent_id,
                    session_id=SESSION_ID,
                    backend=backend,
                    outcome=Outcome.AMBIGUOUS,
                    reason=expected.reason,
                    action=Action.SETTLED,
                    decided_at=time.time(),
                    evidence={"resolved_by": "operator", "resolution": resolution},
                )
                self.run(journal.settle(decision))
        finally:
            self.run(journal.close())
        self.pending = None
        if resolution == "reset":
            self.expected = []
            self.acked = []
        if resolution == "complete":
            self.expected = self.expected + copy.deepcopy(missing)
        _event(f"operator: {resolution}")

    @precondition(lambda self: self.stuck())
    @rule()
    def operator_accepts_history(self) -> None:
        """An operator accepts the stored history and settles the AMBIGUOUS intent.

        Having read the denial's evidence, the operator keeps the history as it is stored (a
        partial batch, or another writer's item, stays; the rest of the batch is not written)
        and settles the intent by writing a decision, with its reason, through the journal
        API. The app keeps running and must go on from the stored history.
        """
        self.operator_settles("accept")

    @precondition(lambda self: self.stuck())
    @rule()
    def operator_resets_session(self) -> None:
        """An operator clears the session and discards the AMBIGUOUS intent.

        The operator clears the history through the store itself, counts that write and
        discards the intent through the journal API. The app keeps running.
        """
        self.operator_settles("reset")

    @precondition(lambda self: self.stuck())
    @rule()
    def operator_completes_batch(self) -> None:
        """An operator writes the missing rest of the batch and settles the AMBIGUOUS intent.

        Knowing what really landed, the operator appends the part of the batch that is missing
        (all of it after another writer's item) through the store itself, counts that write
        and settles the intent with a decision through the journal API. The app keeps running.
        """
        self.operator_settles("complete")

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def history_is_the_model(self) -> None:
        """The store holds exactly what the model predicts."""
        assert self.stored() == self.expected

    @invariant()
    def no_unmodelled_duplicates(self) -> None:
        """No item is stored more often than the model itself appended it."""
        extra = Counter(map(_key, self.stored())) - Counter(map(_key, self.expected))
        assert not extra, f"stored more often than appended: {dict(extra)}"

    @invariant()
    def acknowledged_items_are_kept_in_order(self) -> None:
        """Every acknowledged item is stored, in the order it was acknowledged."""
        assert _is_subsequence(self.acked, self.stored())

    @invariant()
    def journal_holds_only_the_pending_write(self) -> None:
        """The journal holds an unresolved intent exactly while the model has one."""
        entries = self.journal_entries()
        if self.pending is None:
            assert not entries, f"unexpected pending intents: {entries}"
        else:
            (entry,) = entries
            assert entry.intent.intent_id == self.pending.intent_id
            assert list(entry.intent.batch) == self.pending.batch
            assert entry.state in (IntentState.FAILED, IntentState.CANCELLED)


def test_reconciling_session_matches_model() -> None:
    """Under any sequence of faulty appends, reads, reconciles, restarts, other workers and
    operator repairs, the session never duplicates, loses or reorders an item and denies
    exactly the ambiguous cases the rule predicts, leaving history untouched."""
    run_state_machine_as_test(ReconcileMachine, settings=settings.get_profile(PROFILE))


# -- regressions: the bugs this machine found ----------------------------------------------------


def _check_invariants(state: ReconcileMachine) -> None:
    state.acknowledged_items_are_kept_in_order()
    state.history_is_the_model()
    state.journal_holds_only_the_pending_write()
    state.no_unmodelled_duplicates()


def test_regression_failed_replay_expires_the_remembered_tail() -> None:
    """After a settling replay fails having written, the next intent records the items that
    really precede it (the example Hypothesis printed)."""
    state = ReconcileMachine()
    try:
        state.start(seed=[], verify_tail=False)
        _check_invariants(state)
        state.append_fresh(fault=Fault.REJECT, partial=0, size=1)
        _check_invariants(state)
        state.append_repeat(backs=[1], fault=None, partial=0)
        _check_invariants(state)
        state.retry_failed_batch(fault=Fault.REJECT, partial=0)
        _check_invariants(state)
        state.append_while_replay_fails(fault=Fault.CONCURRENT_WRITER, partial=0, size=1)
        _check_invariants(state)
        state.operator_accepts_history()
        _check_invariants(state)
        state.retry_failed_batch(fault=Fault.REJECT, partial=0)
        _check_invariants(state)
    finally:
        state.teardown()


async def test_regression_lost_ack_after_failed_replay_is_stored_once(tmp_path: Path) -> None:
    """A batch whose acknowledgement was lost is stored once, even after a failed replay and
    an operator's settlement."""

    def item(text: str) -> Item:
        return {"role": "user", "content": text}

    store = SQLiteSession(SESSION_ID, tmp_path / "chat.db")
    faulty = FaultInjectingSession(store)
    journal = SQLiteJournal(tmp_path / "journal.db")
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=journal))
    try:
        await session.add_items([item("p")])
        await session.add_items([item("q")])
        faulty.plan(Fault.REJECT)
        with pytest.raises(BackendFailure):
            await session.add_items([item("p"), item("r")])
        # Settling it first, the next append replays [p, r]; only p is written.
        faulty.plan(Fault.PARTIAL, partial_items=1)
        with pytest.raises(BackendFailure):
            await session.add_items([item("t")])
        (entry,) = await journal.pending(SESSION_ID)
        decision = Decision(
            intent_id=entry.intent.intent_id,
            session_id=SESSION_ID,
            backend=entry.intent.backend,
            outcome=Outcome.AMBIGUOUS,
            reason=Reason.PARTIAL_COMMIT,
            action=Action.SETTLED,
            decided_at=time.time(),
            evidence={"resolved_by": "operator"},
        )
        operator = SQLiteJournal(tmp_path / "journal.db")
        await operator.settle(decision)
        await operator.close()
        faulty.plan(Fault.LOST_ACK)
        with pytest.raises(BackendFailure):
            await session.add_items([item("q")])
        await session.reconcile()
        contents = [stored["content"] for stored in await store.get_items()]
        assert contents == ["p", "q", "p", "q"]
    finally:
        store.close()
        await journal.close()


def test_regression_retry_after_another_workers_append_is_stored() -> None:
    """A retried batch is appended when another worker has written since the settlement
    (the example Hypothesis printed)."""
    state = ReconcileMachine()
    try:
        state.start(seed=["a"], verify_tail=False)
        _check_invariants(state)
        state.append_echo(fault=Fault.REJECT, partial=0, same=False, size=1)
        _check_invariants(state)
        state.read()
        _check_invariants(state)
        state.other_worker_appends(size=1)
        _check_invariants(state)
        state.retry_failed_batch(fault=None, partial=0)
        _check_invariants(state)
    finally:
        state.teardown()
