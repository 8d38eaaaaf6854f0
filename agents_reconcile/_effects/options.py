"""The options of ``effect_tool`` and ``as_effect_tool``, checked when the tool is made (before
any call, so before anything is written): a flag is a real ``bool`` (``idempotent="false"``
is refused, not read as true), a callable is one, an option ``function_tool`` does not take
is named. Everything is refused with ``ConfigurationError`` naming the parameter."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Final

from ..errors import ConfigurationError

__all__ = [
    "checked_check",
    "checked_flag",
    "checked_function_tool_options",
    "checked_key",
    "checked_tool",
]

_KINDS: Final[tuple[tuple[frozenset[str], Callable[[Any], bool], str], ...]] = (
    (
        frozenset({"use_docstring_info", "strict_mode", "defer_loading"}),
        lambda value: type(value) is bool,
        "True or False",
    ),
    (
        frozenset({"needs_approval", "is_enabled"}),
        lambda value: type(value) is bool or callable(value),
        "True, False or a callable",
    ),
    (
        frozenset({"failure_error_function", "timeout_error_function", "custom_data_extractor"}),
        lambda value: value is None or callable(value),
        "None or a callable",
    ),
    (
        frozenset({"name_override", "description_override"}),
        lambda value: value is None or isinstance(value, str),
        "None or a str",
    ),
    (
        frozenset({"tool_input_guardrails", "tool_output_guardrails", "allowed_callers"}),
        lambda value: value is None or isinstance(value, list),
        "None or a list",
    ),
)
"""What the flags and callables among ``function_tool``'s options must be."""


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"[:120]


def checked_flag(name: str, value: Any, where: str) -> bool:
    """``value`` when it is a bool (not a truthy string or number)."""
    if type(value) is not bool:
        raise ConfigurationError(f"{where}: {name} must be True or False, not {_shown(value)}")
    return value


def checked_check(check: Any, where: str) -> Callable[[str], Any] | None:
    """``check`` when it is None or a callable (async, or sync: run in a worker thread)."""
    if check is None or callable(check):
        checked: Callable[[str], Any] | None = check
        return checked
    raise ConfigurationError(
        f"{where}: check must be None or a callable taking the effect's key (async or sync), "
        f"not {_shown(check)}"
    )


def checked_key(key: Any, where: str) -> Callable[[dict[str, Any]], str] | None:
    """``key`` when it is None or a callable (sync: it is asked before anything is written, so
    it must not wait on anything)."""
    if key is None:
        return None
    if callable(key) and not inspect.iscoroutinefunction(key):
        checked: Callable[[dict[str, Any]], str] = key
        return checked
    raise ConfigurationError(
        f"{where}: key must be None or a plain (not async) callable taking the call's "
        f"arguments (a dict) and returning the effect's own key as a str, not {_shown(key)}"
    )


def checked_tool(tool: Any, where: str) -> None:
    from agents import FunctionTool

    if not isinstance(tool, FunctionTool):
        raise ConfigurationError(f"{where}: tool must be a FunctionTool, not {_shown(tool)}")


def checked_function_tool_options(options: Mapping[str, Any], where: str) -> None:
    """Refuse an option ``function_tool`` does not take, and a mistyped flag or callable."""
    from agents import function_tool

    known = set(inspect.signature(function_tool).parameters) - {"func"}
    for name, value in options.items():
        if name not in known:
            raise ConfigurationError(
                f"{where}: {name} is not an option of function_tool (nor of effect_tool: "
                "check, idempotent, key)"
            )
        for names, fits, expected in _KINDS:
            if name in names and not fits(value):
                raise ConfigurationError(f"{where}: {name} must be {expected}, not {_shown(value)}")
