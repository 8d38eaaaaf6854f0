"""The SDK's ``Session`` protocol as this package reads it: the names of its four history
methods, in the order the SDK declares them. What a session must have to be wrapped, to identify
its store, or to pass the conformance suite is checked against this one list."""

from __future__ import annotations

from typing import Final

__all__ = ["HISTORY_METHODS"]

HISTORY_METHODS: Final = ("get_items", "add_items", "pop_item", "clear_session")
