"""How the operator's commands answer: their exit codes, one JSON document under ``--json``,
tables for a terminal, and the times, ages, owners and lines several commands print alike."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import orjson

__all__ = [
    "EXIT_ATTENTION",
    "EXIT_OK",
    "age_text",
    "aside_line",
    "column_widths",
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
