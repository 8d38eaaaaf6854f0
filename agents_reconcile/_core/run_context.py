"""What a run hands its filters, hooks and tools, read the same way by each: the run's context
when it is a mutable mapping (the only kind a copy of an intent can travel in), and the
``ReconcilingSession`` whose gate a ``RunConfig`` holds (the gate carries its session under
``GATE_MARK``, so a tool finds the session of its run even before the run reads it)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from agents import RunConfig

__all__ = ["GATE_MARK", "context_of", "gated_session"]

GATE_MARK: Final = "__agents_reconcile_session__"
"""The attribute of the gate's model-input filter that holds the session's admission."""


def context_of(wrapper: Any) -> MutableMapping[str, Any] | None:
    """The run's context when it is a mutable mapping (the only kind a copy can live in)."""
    if wrapper is None:
        return None  # called on every append: the common cases skip the ABC check
    context = getattr(wrapper, "context", None)
    if type(context) is dict:
        return context
    return context if isinstance(context, MutableMapping) else None


def gated_session(config: RunConfig) -> Any:
    """The ``ReconcilingSession`` whose gate ``config`` holds, or None."""
    admission = getattr(config.call_model_input_filter, GATE_MARK, None)
    return getattr(admission, "session", None)
