"""How the operator's commands answer: their exit codes, one JSON document under ``--json``,
tables for a terminal, and the times, ages, owners, evidence and lines several commands print
alike.

One convention each, in every command's text: positions count from 1 (the first item of a
history or a batch is 1), where ``--json`` counts from 0, as the records do; times are UTC,
``2026-12-01 10:20:51`` (ISO 8601 to the second), where ``--json`` gives seconds since the
Unix epoch, as numbers."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from .._core.explanations import evidence_text

__all__ = [
    "EXIT_ATTENTION",
    "EXIT_OK",
    "age_text",
    "aside_line",
    "column_widths",
    "evidence_line",
    "moment",
    "owner_text",
    "print_json",
    "print_table",
    "refusal",
    "repeats_text",
    "table_row",
    "utc_time",
]

EXIT_OK: Final = 0
"""Fine: nothing needs an operator."""
EXIT_ATTENTION: Final = 1
"""Something needs an operator, or what was asked was refused."""


def print_json(document: Any) -> None:
    """``document`` as indented JSON on stdout (anything else JSON lacks as its text)."""
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2, default=str).decode())
    sys.stdout.write("\n")


def refusal(refused: Exception) -> dict[str, Any]:
    """A refusal under ``--json``: the error's fields every command's errors have, and
    ``refused`` (its text) as before."""
    text = str(refused)
    return {"error": text, "kind": type(refused).__name__, "exit": EXIT_ATTENTION, "refused": text}


def print_table(rows: Sequence[Sequence[str]]) -> None:
    """``rows`` (the first the headings) in aligned columns."""
    widths = column_widths(rows)
    for row in rows:
        print(table_row(row, widths))


def column_widths(rows: Sequence[Sequence[str]]) -> list[int]:
    """How wide each column of ``rows`` is."""
    return [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]


def table_row(row: Sequence[str], widths: Sequence[int]) -> str:
    """One row of a table, its cells padded to ``widths``."""
    return "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()


def utc_time(timestamp: float) -> str:
    """A moment as people read it, in UTC to the second."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S")


def moment(value: object) -> str:
    """A moment a record may leave unset (None: ``-``) as ``utc_time`` prints it."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return utc_time(value)
    return "-" if value is None else str(value)


_HISTORY_POSITIONS: Final = ("removed",)
"""Evidence keys holding positions in a history (a repair's removed items), from 0."""
_BATCH_POSITION: Final = "item"
"""The evidence key holding one position in a batch (the item a refusal names), from 0."""
_BATCH_RANGE: Final = "refused"
"""The evidence key holding a range of a batch's positions, ``[first, end)`` from 0."""


def evidence_line(evidence: Mapping[str, Any]) -> str:
    """A decision's evidence on one line for people (``evidence_text``), with its positions
    counted from 1 and its moments (``*_at``) in UTC; the record, and ``--json``, keep them
    as stored (from 0; seconds since the epoch)."""
    shown: dict[str, Any] = {}
    for key, value in evidence.items():
        if key in _HISTORY_POSITIONS and isinstance(value, list | tuple):
            shown[key] = [_counted(position) for position in value]
        elif key == _BATCH_POSITION:
            shown[key] = _counted(value)
        elif key == _BATCH_RANGE and _is_range(value):
            first, end = value
            shown[key] = f"{first + 1}-{end}" if end > first + 1 else str(first + 1)
        elif key.endswith("_at") and isinstance(value, int | float) and not isinstance(value, bool):
            shown[key] = utc_time(value)
        else:
            shown[key] = value
    return evidence_text(shown)


def _counted(position: object) -> object:
    """A position from 0 as counted from 1 (anything else as it is)."""
    if isinstance(position, int) and not isinstance(position, bool):
        return position + 1
    return position


def _is_range(value: object) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(end, int) and not isinstance(end, bool) for end in value)
    )


def age_text(seconds: float) -> str:
    """An age in its two largest units (``3m07s``, ``2d05h``)."""
    whole = max(int(seconds), 0)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def owner_text(intent: dict[str, Any]) -> str:
    """Who holds an intent or effect (host and process), and whether it is alive."""
    host_and_pid = intent["owner"].rsplit("/", 1)[0]
    return f"{host_and_pid} ({'live' if intent['owner_live'] else 'gone'})"


def repeats_text(decision: dict[str, Any]) -> str:
    """How often a decision was reached again, and when last; empty when only once."""
    if decision["repeats"] <= 1:
        return ""
    return f"  (x{decision['repeats']}, last {utc_time(decision['last_seen'])})"


def aside_line(aside: dict[str, Any]) -> str:
    """A record set aside, on one line: where its bytes are kept and why it was refused."""
    return (
        f"SET ASIDE intent {aside['intent_id']} (session {aside['session_id']!r}) on "
        f"{utc_time(aside['set_aside_at'])} by {aside['actor']} ({aside['reason']}): its record "
        f"kept, {aside['size']} bytes, {aside['digest']}; refused because: {aside['problem']}"
    )
