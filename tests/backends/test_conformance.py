"""The conformance suite users run on their own backends (``agents_reconcile.conformance``),
itself checked: every registered journal and revisioned store, and the SDK's own sessions, keep
every contract that applies to them; each contract is failed, naming it, by a toy backend that
breaks it; capabilities a backend lacks skip their contracts with the reason; and the example in
the docs runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agents_reconcile import MemoryJournal, SQLiteJournal
from agents_reconcile.conformance import (
    Contract,
    ContractViolation,
    JournalContract,
    RevisionedStoreContract,
    SessionContract,
    check_journal,
    contracts,
)
from agents_reconcile.conformance._core import CONTRACTS

from ..support.backends import BACKEND_PARAMS, Place, close, registered
from ..support.conformance_toys import BROKEN, CORRECT, IntentsOnly, Toy
from ..support.dict_mutants import MUTANTS

NEWER = 42
"""A schema version newer than any release's."""

# -- every registered backend, and the SDK's own sessions, keep the contracts -------------------


class TestEveryRegisteredJournalKeepsTheJournalContracts(JournalContract):
    """Each registered backend's journal (the ``place`` fixture: one per backend, in a namespace
    of its own), as a user's own journal would be checked."""

    @pytest.fixture(autouse=True)
    def _on(self, place: Place) -> None:
        self.place = place

    async def make_journal(self) -> Any:
        return self.place.journal()

    async def another_journal(self, journal: Any) -> Any:
        # A second object on the same data: a memory journal's shares its rows; an SQLite
        # journal opened by address is shared per file in a process, so one of its own.
        if isinstance(journal, MemoryJournal):
            return journal.another_worker()
        if isinstance(journal, SQLiteJournal):
            return SQLiteJournal(journal.path)
        return self.place.journal()

    async def journal_with_newer_schema(self, journal: Any) -> Any:
        storage = self.place.storage()
        await journal.close()
        await storage.stamp("journal", NEWER)
        return self.place.journal()


@pytest.fixture(params=registered("store"))
async def store_place(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Place]:
    """Where each registered backend keeps this test's stores; cleaned up afterwards."""
    found = Place(request.param, tmp_path, "store")
    yield found
    await found.cleanup()


class TestEveryRegisteredRevisionedStoreKeepsTheStoreContracts(RevisionedStoreContract):
    """Each registered backend's revisioned store: its own contracts and a session's."""

    @pytest.fixture(autouse=True)
    def _on(self, store_place: Place) -> None:
        self.place = store_place

    async def make_store(self, session_id: str) -> Any:
        return self.place.store(session_id)

    async def store_with_newer_schema(self, store: Any) -> Any:
        storage = self.place.storage()
        await store.close()
        await storage.stamp("store", NEWER)
        return self.place.store(store.session_id)


SDK_SESSIONS = [param for param in BACKEND_PARAMS if not param.values[0].revisioned]


class TestTheSDKsOwnSessionsKeepTheSessionContracts(SessionContract):
    """``SQLiteSession`` and the SDK's other file-backed sessions (those whose driver is
    installed), on files of their own."""

    @pytest.fixture(autouse=True, params=SDK_SESSIONS)
    async def _on(self, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[None]:
        self.kind, self.directory = request.param, tmp_path
        self.opened: list[Any] = []
        yield
        for session in self.opened:
            await close(session)

    async def make_session(self, session_id: str) -> Any:
        session = await self.kind.open(session_id, self.directory)
        self.opened.append(session)
        return session


# -- toys: correct ones keep the contracts, broken ones fail the one they break -----------------


@pytest.mark.parametrize("toy", CORRECT, ids=[toy.name for toy in CORRECT])
async def test_a_correct_toy_keeps_every_contract_that_applies_to_it(toy: Toy) -> None:
    report = await toy.check()
    assert report.ok, f"{toy.name}:\n{report}"
    assert report.passed


@pytest.mark.parametrize("toy", BROKEN, ids=[f"{toy.name} -> {toy.breaks}" for toy in BROKEN])
async def test_a_broken_toy_fails_the_contract_it_breaks_naming_it(toy: Toy) -> None:
    [found] = [each for each in contracts() if each.name == toy.breaks]
    with pytest.raises(ContractViolation) as caught:
        await found.run(toy.subject())
    assert caught.value.contract == toy.breaks
    assert toy.breaks in str(caught.value)
    assert found.statement in str(caught.value)


async def test_one_contract_runs_on_a_subject_built_from_the_public_module() -> None:
    """``Contract.run`` takes a ``Subject``, which ``agents_reconcile.conformance`` exports:
    one contract runs on a journal of one's own without ``check_journal``, and a hook not given
    skips the contracts that need it, saying which."""
    from agents_reconcile.conformance import ContractSkipped, Subject, contracts

    first = contracts("journal")[0]
    await first.run(Subject(journal=MemoryJournal))
    with pytest.raises(ContractSkipped, match="no 'journal' hook"):
        await first.run(Subject(store=MemoryJournal))


def test_every_contract_is_failed_by_some_broken_toy() -> None:
    """No check passes whatever it is given: each has a toy, or a mutant of the dict backend,
    it catches."""
    caught = {toy.breaks for toy in BROKEN}.union(*(mutant.killed_by for mutant in MUTANTS))
    assert caught == set(CONTRACTS)


def test_every_contract_states_itself_in_a_sentence() -> None:
    for found in contracts():
        assert found.statement.endswith("."), found.name
        assert found.name == found.check.__name__


async def test_a_journal_that_ignores_limit_fails_the_limit_contract_and_only_it() -> None:
    """Run whole, the suite reports the one contract a journal breaks and passes the others."""
    [toy] = [toy for toy in BROKEN if toy.name == "a journal that ignores limit"]
    report = await toy.check()
    assert [result.contract.name for result in report.failed] == ["decisions_honour_limit"]
    [failed] = report.failed
    assert failed.violation is not None and "limit=2" in failed.violation.problem
    assert "failed" in str(report) and "decisions_honour_limit" in str(report)
    with pytest.raises(ContractViolation, match="decisions_honour_limit"):
        report.raise_for_violations()


async def test_a_session_whose_get_items_ignores_limit_fails_the_limit_contract() -> None:
    [toy] = [toy for toy in BROKEN if toy.name == "a session whose get_items ignores limit"]
    report = await toy.check()
    assert report.status("get_items_limit_returns_the_newest_oldest_first") == "failed"
    assert report.status("add_items_appends_in_order") == "passed"


async def test_a_journal_declaring_nothing_skips_the_contracts_of_what_it_lacks_saying_why() -> (
    None
):
    report = await check_journal(IntentsOnly)
    assert report.ok, str(report)
    skipped = {result.contract.name: result.detail for result in report.skipped}
    by_kind = {result.contract.kind: result.detail for result in report.skipped}
    assert "has no effects component" in by_kind["effects"]
    assert "has no aside component" in by_kind["aside"]
    assert "has no sealing component" in by_kind["sealing"]
    assert "no schema" in skipped["schema_check_writes_nothing_and_migrate_is_idempotent"]
    assert "has no pages component" in by_kind["pages"]
    assert "has no retention component" in by_kind["retention"]
    across = "a_write_through_one_journal_object_is_read_at_once_through_another"
    assert "the another hook" in skipped[across]
    for result in report.results:
        name = result.contract.name
        applies = result.contract.kind == "journal" and "schema" not in name and name != across
        assert result.status == ("passed" if applies else "skipped"), name


async def test_a_newer_schema_contract_without_a_way_to_stamp_one_is_skipped_saying_why() -> None:
    [toy] = [toy for toy in CORRECT if toy.name == "a journal with a schema"]
    world = toy.world()
    report = await check_journal(world.make, only=["a_newer_schema_is_refused"])
    [result] = report.results
    assert result.status == "skipped" and "newer_schema" in result.detail


async def test_only_runs_the_contracts_named_and_an_unknown_name_is_refused() -> None:
    report = await check_journal(IntentsOnly, only=["decisions_honour_limit", "writes_are_counted"])
    assert [result.contract.name for result in report.results] == [
        "writes_are_counted",
        "decisions_honour_limit",
    ]
    with pytest.raises(ValueError, match="no_such_contract"):
        await check_journal(IntentsOnly, only=["no_such_contract"])


async def test_an_exception_the_backend_raises_breaks_the_contract_it_was_checked_for() -> None:
    """A backend that raises where it should answer fails the check, naming the contract, with
    the backend's exception as the cause."""

    class Exploding(IntentsOnly):
        def __init__(self) -> None:
            super().__init__()

            async def pending(*args: Any, **kwargs: Any) -> Any:
                raise RuntimeError("connection reset")

            self.pending = pending

    found: Contract = CONTRACTS["pending_is_oldest_first"]
    report = await check_journal(Exploding, only=[found.name])
    [result] = report.failed
    assert result.violation is not None
    assert "RuntimeError: connection reset" in result.violation.problem
    assert isinstance(result.violation.__cause__, RuntimeError)


def test_importing_the_conformance_package_leaves_pytest_unimported() -> None:
    code = (
        "import sys, agents_reconcile.conformance as c;"
        "print('pytest' in sys.modules, len(c.contracts()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["False", str(len(CONTRACTS))]


# -- the docs -----------------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "backends.md"


def docs_examples() -> Iterator[tuple[str, str]]:
    """The Python blocks of the docs' section on checking one's own backend, by file name (the
    comment on their first line) or position."""
    text = DOCS.read_text("utf-8")
    section = text[text.index("## Checking your own backend") :]
    section = section[: section.find("\n## ", 1) if "\n## " in section[1:] else None]
    for n, block in enumerate(re.findall(r"```python\n(.*?)```", section, re.DOTALL)):
        named = re.match(r"# (\S+\.py)\n", block)
        yield (named.group(1) if named else f"example_{n}.py"), block


def test_the_docs_example_runs_as_written(tmp_path: Path) -> None:
    examples = dict(docs_examples())
    for name, code in examples.items():
        (tmp_path / name).write_text(code)
    script = next(name for name in examples if name.startswith("check_"))
    done = subprocess.run(
        [sys.executable, script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "failed   decisions_honour_limit" in done.stdout
    tests = [name for name in examples if name.startswith("test_")]
    assert tests, "the docs show no pytest module"
    # With pytest-asyncio (its strict mode: the tests are marked) and without it.
    for plugin in ("asyncio", "no:asyncio"):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", plugin, *tests],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        # The toy journal breaks one contract; it has no schema (two skipped) and no second
        # object on its data is given (one skipped); the SDK's SQLiteSession keeps every
        # session contract.
        journal_contracts = len(
            contracts("journal", "effects", "aside", "pages", "retention", "sealing")
        )
        passed = journal_contracts - 4 + len(contracts("session"))
        assert f"1 failed, {passed} passed, 3 skipped" in done.stdout, done.stdout
        failed = "FAILED test_my_journal.py::TestForgetfulJournal::test_decisions_honour_limit"
        assert failed in done.stdout
