"""The conformance suite against a backend written from outside (``tests/support/dict_backend``):
the backend as written keeps every contract that applies to it, and each mutant of it (a mistake
a newcomer makes) is killed by the contracts named for it; the mutants the suite lets through
are listed with the reason they cannot break a guarantee."""

from __future__ import annotations

from typing import Any

import pytest

from agents_reconcile.conformance import Report, check_journal, check_store

from ..support.dict_backend import DictJournal, DictStorage, DictStore
from ..support.dict_mutants import MUTANTS, Mutant


async def _checked(kind: str, made: type[Any]) -> Report:
    """The whole suite of ``kind`` run on objects of ``made``, each check on storage of its own,
    a second object (the ``another`` hook) on the same storage."""
    if kind == "store":
        storage = DictStorage()
        return await check_store(lambda session_id: made(session_id, storage))
    return await check_journal(lambda: made(), another=lambda journal: made(journal.storage))


async def test_the_dict_backend_keeps_every_contract_that_applies_to_it() -> None:
    """The journal (with its effects, aside and retention) and the store as written pass; only
    the components they lack are skipped."""
    journal = await _checked("journal", DictJournal)
    assert journal.ok, str(journal)
    lacking = {"pages", "sealing"}
    skipped = [
        result.contract.name for result in journal.skipped if result.contract.kind not in lacking
    ]
    assert skipped == [
        "schema_check_writes_nothing_and_migrate_is_idempotent",
        "a_newer_schema_is_refused",
    ], str(journal)
    store = await _checked("store", DictStore)
    assert store.ok, str(store)
    assert [result.contract.name for result in store.skipped] == [
        "store_schema_check_writes_nothing_and_migrate_is_idempotent",
        "a_newer_store_schema_is_refused",
    ], str(store)


KILLED = [mutant for mutant in MUTANTS if mutant.killed_by]
SURVIVING = [mutant for mutant in MUTANTS if not mutant.killed_by]


@pytest.mark.parametrize("mutant", KILLED, ids=[mutant.name for mutant in KILLED])
async def test_a_mutant_is_killed_by_the_contracts_named_for_it(mutant: Mutant) -> None:
    """Each contract named for the mutant fails on it, saying what it saw."""
    report = await _checked(mutant.kind, mutant.made)
    failed = {result.contract.name for result in report.failed}
    assert mutant.killed_by <= failed, f"{mutant.name}: failed {sorted(failed)}\n{report}"


@pytest.mark.parametrize("mutant", SURVIVING, ids=[mutant.name for mutant in SURVIVING])
async def test_a_mutant_the_suite_lets_through_says_why_it_breaks_no_guarantee(
    mutant: Mutant,
) -> None:
    """A surviving mutant passes the whole suite and its entry says why that is safe."""
    report = await _checked(mutant.kind, mutant.made)
    assert report.ok, f"{mutant.name} is killed now: name its contracts\n{report}"
    assert len(mutant.survives_because) > 40


def test_the_mutants_cover_every_survivor_the_issue_named_and_a_dozen_more() -> None:
    """Ignoring the keyring (in the intents or the effects), cache and replica reads, an age
    from created_at or in the wrong unit, lost aside bytes, lost nulls and a prune that removes
    what an unresolved intent needs are all there, with at least a dozen others."""
    named = {mutant.name for mutant in MUTANTS}
    for wanted in (
        "ignores the lent keyring",
        "reads kept in a cache",
        "reads from a lagging replica",
        "age from the client's created_at",
        "age in milliseconds",
        "aside keeps no bytes",
        "loses nulls",
        "effects ignore the lent keyring",
        "prune removes an unresolved intent",
        "prune removes a receipt of a session with an unresolved intent",
    ):
        assert wanted in named
    assert len(MUTANTS) >= 10 + 12
