"""The operator's commands of ``agents-reconcile``: ``status``, ``trail``, ``decisions``,
``show``, ``resolve`` and ``check``, on any journal address. Each prints a table for a terminal,
or with ``--json`` one JSON document; none prints an item's content. Exit codes (``output``): 0
fine, 1 something needs an operator (or a resolution was refused), 2 the journal or store could
not be used.

The commands that list (``status``, ``trail``, ``decisions``) and ``check`` are here; ``show`` is
in ``showing``, ``resolve`` in ``resolving``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, Final

from .._backends.rows import collecting_damage
from .._session.config import ReconcileConfig
from . import views
from .hints import more_lines, next_page_hint, operator_hints, show_hint
from .journals import command_journal, journal_named
from .keys import payload_keys
from .output import (
    EXIT_ATTENTION,
    EXIT_OK,
    age_text,
    aside_line,
    column_widths,
    evidence_line,
    owner_text,
    print_json,
    print_table,
    refusal,
    repeats_text,
    table_row,
    utc_time,
)
from .presence import NotFound, journal_holds

__all__ = ["EXIT_ATTENTION", "check", "decisions", "resolve", "show", "status", "trail"]

_UNREAD: Final = {
    "PayloadKeyUnknown": "SEALED (give the payload keys: --payload-key-file)",
    "UnsupportedRecordVersion": "NEWER (written by a newer release)",
}
"""Rows that cannot be read here but are not damaged, as status labels them."""


def status(args: argparse.Namespace) -> int:
    async def read() -> tuple[dict[str, Any], str | None]:
        journal = await command_journal(args)
        try:
            found = await views.status(
                journal,
                session_id=args.session,
                lease_seconds=ReconcileConfig().lease_seconds,
                limit=args.limit,
                after=args.after,
            )
            shown = any(found[part] for part in ("pending", "effects", "damaged"))
            # A first page of one session with nothing on it: is the session there at all?
            first = args.session is not None and args.after is None
            held = await journal_holds(journal, args.session) if first and not shown else None
            return found, held
        finally:
            await journal.close()

    found, held = asyncio.run(read())
    if held == "":
        raise _unknown_session(args)
    if args.json:
        print_json(found)
    else:
        _print_status(found, args)
    return EXIT_ATTENTION if found["needs_operator"] else EXIT_OK


def _print_status(found: dict[str, Any], args: argparse.Namespace) -> None:
    where = f" for session {found['session']!r}" if found["session"] else ""
    page = found["page"]
    if not found["pending"] and not found["damaged"] and not found["effects"]:
        later = " on this page" if page["after"] else ""
        print(f"No pending intents or unfinished tool effects{where}{later}.")
        return
    if found["pending"]:
        rows = [("SESSION", "INTENT", "STATE", "OWNER", "AGE", "ITEMS", "LAST DECISION", "")]
        for intent in found["pending"]:
            last = intent["last_decision"]
            rows.append(
                (
                    intent["session_id"],
                    intent["intent_id"],
                    intent["state"],
                    owner_text(intent),
                    age_text(intent["age_seconds"]),
                    str(intent["items"]),
                    "-" if last is None else f"{last['action']}: {last['reason']}",
                    "NEEDS OPERATOR" if intent["needs_operator"] else "",
                )
            )
        print_table(rows)
    for line in more_lines(page, "pending"):
        print(line)
    if found["effects"]:
        if found["pending"]:
            print()
        _print_effects(found["effects"])
    for line in more_lines(page, "effects"):
        print(line)
    for damaged in found["damaged"]:
        label = _UNREAD.get(damaged["error"], "DAMAGED")
        print(
            f"{label} {damaged['kind']} {damaged['id']} (session {damaged['session_id']!r}): "
            f"{damaged['problem']}"
        )
    if page["next"] is not None:
        print(f"\nthe next page: {next_page_hint(page['next'], args)}")
    for line in operator_hints(found, args):
        print(line)


def _print_effects(effects: list[dict[str, Any]]) -> None:
    """Tool effects started with no receipt: a table, each marked when it waits for a person."""
    rows = [("SESSION", "EFFECT", "TOOL", "OWNER", "AGE", "ATTEMPTS", "LAST DECISION", "")]
    for effect in effects:
        last = effect["last_decision"]
        rows.append(
            (
                effect["session_id"],
                effect["effect"],
                effect["tool"],
                "runs again" if effect["runs_again"] else owner_text(effect),
                age_text(effect["age_seconds"]),
                str(effect["attempts"]),
                "-" if last is None else f"{last['action']}: {last['reason']}",
                "NEEDS OPERATOR" if effect["needs_operator"] else "",
            )
        )
    print_table(rows)


def trail(args: argparse.Namespace) -> int:
    async def read() -> tuple[dict[str, Any], str | None]:
        journal = await command_journal(args)
        try:
            lease = ReconcileConfig().lease_seconds
            found = await views.trail(journal, args.session, limit=args.limit, lease_seconds=lease)
            shown = any(found[part] for part in ("decisions", "effects", "set_aside", "damaged"))
            held = None if shown else await journal_holds(journal, args.session)
            return found, held
        finally:
            await journal.close()

    found, held = asyncio.run(read())
    if held == "":
        raise _unknown_session(args)
    if args.json:
        print_json(found)
        return EXIT_ATTENTION if found["damaged"] else EXIT_OK
    if not found["decisions"]:
        print(f"No decisions recorded for session {args.session!r}{_holding(held)}.")
    for decision in found["decisions"]:
        print(
            f"{utc_time(decision['decided_at'])}  intent {decision['intent_id']}  "
            f"{decision['outcome']} ({decision['reason']}) -> {decision['action']}"
            f"{repeats_text(decision)}"
        )
        print(f"    evidence: {evidence_line(decision['evidence'])}")
    for effect in found["effects"]:
        waits = "waits for an operator" if effect["needs_operator"] else "not finished yet"
        print(
            f"effect {effect['effect']} ({effect['tool']}, call {effect['call_id']}) has no "
            f"receipt: {waits}; for the evidence: {show_hint(effect['effect'], args)}"
        )
    for aside in found["set_aside"]:
        print(aside_line(aside))
    for damaged in found["damaged"]:
        print(f"DAMAGED decision under {damaged['id']}: {damaged['problem']}")
    return EXIT_ATTENTION if found["damaged"] else EXIT_OK


def decisions(args: argparse.Namespace) -> int:
    async def read() -> tuple[list[Any], list[Any], str | None]:
        journal = await command_journal(args)
        try:
            with collecting_damage() as damaged:
                found = await journal.decisions(session_id=args.session, limit=args.limit)
            held = None
            if args.session is not None and not found and not damaged:
                held = await journal_holds(journal, args.session)
            return found, damaged, held
        finally:
            await journal.close()

    found, damaged, held = asyncio.run(read())
    if held == "":
        raise _unknown_session(args)
    if args.json:
        print_json(
            {
                "decisions": [views.decision_view(d) for d in found],
                "damaged": [views.damaged_view(d) for d in damaged],
            }
        )
        return EXIT_ATTENTION if damaged else EXIT_OK
    if not found:
        where = f" for session {args.session!r}" if args.session else ""
        print(f"No decisions recorded{where}{_holding(held)}.")
    rows = [("DECIDED (UTC)", "SESSION", "INTENT", "OUTCOME", "REASON", "ACTION")]
    for decision in found:
        rows.append(
            (
                utc_time(decision.decided_at),
                decision.session_id,
                decision.intent_id,
                decision.outcome.value,
                decision.reason.value,
                decision.action.value,
            )
        )
    if found:
        widths = column_widths(rows)
        print(table_row(rows[0], widths))
        for row, decision in zip(rows[1:], found, strict=True):
            print(table_row(row, widths))
            # Digests and counts only: the evidence never holds an item's content.
            print(f"    evidence: {evidence_line(decision.evidence)}")
    for record in damaged:
        print(f"DAMAGED decision under {record.ident}: {record.problem}")
    return EXIT_ATTENTION if damaged else EXIT_OK


def _holding(held: str | None) -> str:
    """What the journal holds of a session it has no decision of, said after "No decisions"."""
    if held == "counted writes":
        return " (the journal knows it: its writes are counted, and none needed a decision)"
    return f" (the journal holds its {held})" if held else ""


def _unknown_session(args: argparse.Namespace) -> NotFound:
    return NotFound(
        f"no session {args.session!r} in journal {journal_named(args)}: it holds no intent, "
        "decision, tool effect, set-aside record or counted write of it (the counted writes "
        "of a session idle longer than the retention are pruned)",
        what="session",
        name=args.session,
    )


def check(args: argparse.Namespace) -> int:
    from .check import RepairRefused, check_session

    if args.repair and not (args.reason or "").strip():
        print(
            "agents-reconcile check: --repair needs --reason (kept in the trail)", file=sys.stderr
        )
        return 2
    try:
        report = asyncio.run(
            check_session(
                args.store,
                args.session,
                repair=args.repair,
                journal=args.journal,
                actor=args.actor,
                reason=args.reason,
                namespace=args.store_namespace,
                payload_keys=payload_keys(args),
                journal_namespace=args.namespace,
            )
        )
    except RepairRefused as refused:
        if args.json:
            print_json(refusal(refused))
        else:
            print(f"refused: {refused}", file=sys.stderr)
        return EXIT_ATTENTION
    if args.json:
        print_json(report.to_json())
    else:
        for line in report.lines():
            print(line)
    return EXIT_ATTENTION if report.needs_operator else EXIT_OK


def show(args: argparse.Namespace) -> int:
    """``show`` (``showing``), imported when it runs."""
    from .showing import show as run

    return run(args)


def resolve(args: argparse.Namespace) -> int:
    """``resolve`` (``resolving``), imported when it runs."""
    from .resolving import resolve as run

    return run(args)
