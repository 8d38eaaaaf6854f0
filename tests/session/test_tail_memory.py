"""The memory of the tail, alone: reads, acknowledged appends and settlements in, the view an
append may trust out; no journal, no store."""

from __future__ import annotations

from agents_reconcile._session.state import KEPT_DIGESTS, TailMemory, TailView


def digests(*names: str) -> tuple[str, ...]:
    return tuple(f"d-{name}" for name in names)


def test_a_read_vouched_for_by_a_count_is_trusted_while_long_enough() -> None:
    """A whole read is trusted for any append; a partial one only as far as it reaches."""
    memory = TailMemory()
    memory.observe(digests("a", "b"), read=2, complete=True, write_count=5)
    assert memory.trusted(10) == TailView(digests("a", "b"), whole=True, write_count=5)
    partial = TailMemory()
    partial.observe(digests("a", "b", "c"), read=3, complete=False, write_count=5)
    assert partial.trusted(3) is not None
    assert partial.trusted(4) is None


def test_a_read_longer_than_kept_is_not_whole() -> None:
    """Only the newest digests are kept; a read longer than that is not the whole history."""
    memory = TailMemory()
    names = [str(n) for n in range(KEPT_DIGESTS + 5)]
    memory.observe(digests(*names), read=len(names), complete=True, write_count=1)
    view = memory.view
    assert view is not None and not view.whole and len(view.digests) == KEPT_DIGESTS


def test_a_shorter_read_that_agrees_keeps_the_longer_view() -> None:
    """A short read (the SDK's own checks) that agrees with what is known changes nothing."""
    memory = TailMemory()
    memory.observe(digests("a", "b", "c"), read=3, complete=True, write_count=2)
    memory.observe(digests("b", "c"), read=2, complete=False, write_count=2)
    assert memory.view == TailView(digests("a", "b", "c"), whole=True, write_count=2)
    memory.observe(digests("x", "c"), read=2, complete=False, write_count=2)
    assert memory.view == TailView(digests("x", "c"), whole=False, write_count=2)


def test_an_undigestible_read_voids_the_view() -> None:
    memory = TailMemory()
    memory.observe(digests("a"), read=1, complete=True, write_count=1)
    memory.observe(None, read=1, complete=True, write_count=1)
    assert memory.view is None


def test_an_acknowledged_append_extends_the_view_with_its_count() -> None:
    """After an acknowledged append the view ends with its batch, at the count it made."""
    memory = TailMemory()
    memory.observe(digests("a"), read=1, complete=True, write_count=3)
    memory.extend(digests("b", "c"), write_count=4)
    assert memory.view == TailView(digests("a", "b", "c"), whole=True, write_count=4)
    empty = TailMemory()
    empty.extend(digests("b"), write_count=1)
    assert empty.view is None


def test_a_view_without_a_count_is_used_once_and_not_kept() -> None:
    memory = TailMemory()
    memory.remember(TailView(digests("a"), whole=True, write_count=None))
    assert memory.view is None
    memory.remember(TailView(digests("a"), whole=True, write_count=7))
    assert memory.trusted(1) is not None


def test_after_a_settlement_nothing_is_trusted_and_the_batch_is_recognised() -> None:
    """A settlement voids the view (the store must be read), widens the read to the settled
    tail, and recognises the same batch sent again while the tail still ends with it."""
    memory = TailMemory()
    memory.observe(digests("a", "b"), read=2, complete=True, write_count=3)
    memory.settle(digests("x"), digests("a", "b"))
    assert memory.trusted(1) is None
    assert memory.wanted(2) == 3
    assert memory.is_retried_batch(digests("x"), digests("z", "a", "b", "x"))
    assert not memory.is_retried_batch(digests("x"), digests("a", "b", "y", "x"))
    assert not memory.is_retried_batch(digests("y"), digests("a", "b", "x"))
    memory.drop_settled()
    assert not memory.is_retried_batch(digests("x"), digests("a", "b", "x"))


def test_forgetting_drops_view_and_settled_batch() -> None:
    memory = TailMemory()
    memory.observe(digests("a"), read=1, complete=True, write_count=1)
    memory.settle(digests("x"), digests("a"))
    memory.forget()
    assert memory.view is None and memory.settled is None
