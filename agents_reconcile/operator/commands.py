"""The operator's commands of ``agents-reconcile``: ``status``, ``show``, ``trail`` and
``resolve``, on any journal address. Each prints a table for a terminal, or with ``--json``
one JSON document; none prints an item's content. Exit codes: 0 fine, 1 something needs an
operator (or a resolution was refused), 2 the journal or store could not be used."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import orjson

from ..config import ReconcileConfig
from ..effects.records import Effect, EffectState
from ..errors import ResolutionRefused
from ..journal import IntentJournal
from ..journal._rows import collecting_damage
from ..journal_client import JournalClient
from ..records import BackendIdentity, evidence_text
from ..resolution import Resolver
from . import views
from .hints import journal_options, operator_hints
from .journals import opened_journal
from .keys import keyring, payload_keys
from .stores import close_store, store_for
from .waiting import effect_status, effect_view

if TYPE_CHECKING:
    from ..journal import JournalEntry

__all__ = ["EXIT_ATTENTION", "check", "decisions", "resolve", "show", "status", "trail"]

EXIT_OK: Final = 0
EFFECTS_BACKEND: Final = BackendIdentity("agents_reconcile.effects", "")
"""The backend named by decisions about tool effects resolved from the command line."""
EXIT_ATTENTION: Final = 1


async def _journal(args: argparse.Namespace, *, writing: bool = False) -> IntentJournal:
    # Signed rows are checked, and sealed ones opened, with the deployment's keys when given.
    return await opened_journal(
        args.journal, namespace=args.namespace, writing=writing, keyring=keyring(args)
    )


def status(args: argparse.Namespace) -> int:
    async def read() -> dict[str, Any]:
        journal = await _journal(args)
        try:
            return await views.status(
                journal, session_id=args.session, lease_seconds=ReconcileConfig().lease_seconds
            )
        finally:
            await journal.close()

    found = asyncio.run(read())
    if args.json:
        _json(found)
    else:
        _print_status(found, args)
    return EXIT_ATTENTION if found["needs_operator"] else EXIT_OK


def _print_status(found: dict[str, Any], args: argparse.Namespace) -> None:
    where = f" for session {found['session']!r}" if found["session"] else ""
    if not found["pending"] and not found["damaged"] and not found["effects"]:
        print(f"No pending intents or unfinished tool effects{where}.")
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
                    _owner(intent),
                    _age(intent["age_seconds"]),
                    str(intent["items"]),
                    "-" if last is None else f"{last['action']}: {last['reason']}",
                    "NEEDS OPERATOR" if intent["needs_operator"] else "",
                )
            )
        _table(rows)
    if found["effects"]:
        if found["pending"]:
            print()
        _print_effects(found["effects"])
    for damaged in found["damaged"]:
        print(
            f"DAMAGED {damaged['kind']} {damaged['id']} (session {damaged['session_id']!r}): "
            f"{damaged['problem']}"
        )
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
                "runs again" if effect["runs_again"] else _owner(effect),
                _age(effect["age_seconds"]),
                str(effect["attempts"]),
                "-" if last is None else f"{last['action']}: {last['reason']}",
                "NEEDS OPERATOR" if effect["needs_operator"] else "",
            )
        )
    _table(rows)


def trail(args: argparse.Namespace) -> int:
    async def read() -> dict[str, Any]:
        journal = await _journal(args)
        try:
            lease = ReconcileConfig().lease_seconds
            return await views.trail(journal, args.session, limit=args.limit, lease_seconds=lease)
        finally:
            await journal.close()

    found = asyncio.run(read())
    if args.json:
        _json(found)
        return EXIT_ATTENTION if found["damaged"] else EXIT_OK
    if not found["decisions"]:
        print(f"No decisions recorded for session {args.session!r}.")
    for decision in found["decisions"]:
        print(
            f"{_when(decision['decided_at'])}  intent {decision['intent_id']}  "
            f"{decision['outcome']} ({decision['reason']}) -> {decision['action']}"
            f"{_repeated(decision)}"
        )
        print(f"    evidence: {evidence_text(decision['evidence'])}")
    for effect in found["effects"]:
        waits = "waits for an operator" if effect["needs_operator"] else "not finished yet"
        show = shlex.join(["agents-reconcile", "show", effect["effect"], *journal_options(args)])
        print(
            f"effect {effect['effect']} ({effect['tool']}, call {effect['call_id']}) has no "
            f"receipt: {waits}; for the evidence: {show}"
        )
    for damaged in found["damaged"]:
        print(f"DAMAGED decision under {damaged['id']}: {damaged['problem']}")
    return EXIT_ATTENTION if found["damaged"] else EXIT_OK


def show(args: argparse.Namespace) -> int:
    try:
        found = asyncio.run(_show(args))
    except ResolutionRefused as refused:
        # Unknown, settled, or a store that is not the intent's: said, not a traceback.
        if args.json:
            _json({"refused": str(refused), "intent_id": refused.intent_id})
        else:
            print(f"{refused}", file=sys.stderr)
        return EXIT_ATTENTION
    if args.json:
        _json(found)
    else:
        _print_show(found)
    return EXIT_OK


def decisions(args: argparse.Namespace) -> int:
    async def read() -> tuple[list[Any], list[Any]]:
        journal = await _journal(args)
        try:
            with collecting_damage() as damaged:
                found = await journal.decisions(session_id=args.session, limit=args.limit)
            return found, damaged
        finally:
            await journal.close()

    found, damaged = asyncio.run(read())
    if args.json:
        _json(
            {
                "decisions": [views.decision_view(d) for d in found],
                "damaged": [views.damaged_view(d) for d in damaged],
            }
        )
        return EXIT_ATTENTION if damaged else EXIT_OK
    if not found:
        where = f" for session {args.session!r}" if args.session else ""
        print(f"No decisions recorded{where}.")
    rows = [("DECIDED (UTC)", "SESSION", "INTENT", "OUTCOME", "REASON", "ACTION")]
    for decision in found:
        rows.append(
            (
                _when(decision.decided_at),
                decision.session_id,
                decision.intent_id,
                decision.outcome.value,
                decision.reason.value,
                decision.action.value,
            )
        )
    if found:
        widths = _widths(rows)
        print(_row(rows[0], widths))
        for row, decision in zip(rows[1:], found, strict=True):
            print(_row(row, widths))
            # Digests and counts only: the evidence never holds an item's content.
            print(f"    evidence: {decision.evidence_text()}")
    for record in damaged:
        print(f"DAMAGED decision under {record.ident}: {record.problem}")
    return EXIT_ATTENTION if damaged else EXIT_OK


async def _show(args: argparse.Namespace) -> dict[str, Any]:
    journal = await _journal(args)
    try:
        effect = await _effect(journal, args.intent)
        if effect is not None:
            shown = effect_view(effect)
            if effect.state is EffectState.STARTED:
                # Whether it waits for a person, judged as status judges it.
                lease = ReconcileConfig().lease_seconds
                judged = effect_status(effect, None, time.time(), lease)
                for name in ("owner_live", "runs_again", "needs_operator"):
                    shown[name] = judged[name]
            with collecting_damage():
                found = await journal.decisions(intent_id=effect.key, limit=args.limit)
            shown["decisions"] = [views.decision_view(d) for d in found]
            return shown
        entry = await _entry(journal, args.intent)
        intent = entry.intent
        with collecting_damage():
            decisions = await journal.decisions(intent_id=intent.intent_id, limit=args.limit)
        now = time.time()
        lease = ReconcileConfig().lease_seconds
        shown = views.intent_view(entry, decisions[0] if decisions else None, now, lease)
        shown["expected"] = {
            "batch_digests": list(intent.batch_digests),
            "before_digests": list(intent.before_digests),
            "before_is_whole": intent.before_is_whole,
            "persisted_count": intent.persisted_count,
            "expected_revision": intent.expected_revision,
            "scheme": intent.scheme,
            "sealed_under": intent.sealed_under,
        }
        resolver, store = _resolver(entry, args, journal)
        try:
            verdict = await resolver.preview(intent.intent_id)
        finally:
            await close_store(store)
        shown["store_now"] = (
            None
            if verdict is None
            else {
                "outcome": verdict.outcome.value,
                "reason": verdict.reason.value,
                "explanation": verdict.reason.explanation,
                "evidence": dict(verdict.evidence),
            }
        )
        shown["decisions"] = [views.decision_view(d) for d in decisions]
        shown["resolutions"] = views.outlook(verdict, len(intent.batch_digests))
        return shown
    finally:
        await journal.close()


def _print_show(found: dict[str, Any]) -> None:
    if "effect" in found:
        for key, value in found.items():
            if key != "decisions":
                print(f"{key:<17} {value}")
        for decision in found["decisions"]:
            print(
                f"decision          {_when(decision['decided_at'])}  {decision['reason']} -> "
                f"{decision['action']}{_repeated(decision)}"
            )
        return
    print(f"intent   {found['intent_id']}")
    print(f"session  {found['session_id']}   backend {found['backend']}")
    live = "live" if found["owner_live"] else "gone"
    age = _age(found["age_seconds"])
    print(f"state    {found['state']}, owner {found['owner']} ({live}), age {age}")
    print("\nexpected (what the write was meant to do):")
    expected = found["expected"]
    print(f"    {found['items']} item(s): {evidence_text({'batch': expected['batch_digests']})}")
    whole = " (the whole history)" if expected["before_is_whole"] else ""
    print(f"    on top of{whole}: {evidence_text({'before': expected['before_digests']})}")
    for key in ("persisted_count", "expected_revision", "sealed_under"):
        if expected[key] is not None:
            print(f"    {key}: {expected[key]}")
    print("\nthe store now:")
    now = found["store_now"]
    if now is None:
        print("    not read (give --store ADDRESS to judge the intent against it)")
    else:
        print(f"    {now['outcome']} ({now['reason']}): {now['explanation']}")
        print(f"    evidence: {evidence_text(now['evidence'])}")
    print("\ndecisions (newest first):")
    for decision in found["decisions"] or []:
        print(
            f"    {_when(decision['decided_at'])}  {decision['outcome']} ({decision['reason']}) "
            f"-> {decision['action']}{_repeated(decision)}"
        )
    if not found["decisions"]:
        print("    none yet")
    print("\nwhat each resolution would do:")
    for name, said in found["resolutions"].items():
        print(f"    --as {name:<9} {said}")


def resolve(args: argparse.Namespace) -> int:
    try:
        decision = asyncio.run(_resolve(args))
    except ResolutionRefused as refused:
        if args.json:
            _json(
                {
                    "refused": str(refused),
                    "intent_id": refused.intent_id,
                    "evidence": refused.evidence,
                }
            )
        else:
            print(f"refused: {refused}", file=sys.stderr)
        return EXIT_ATTENTION
    if args.json:
        _json(views.decision_view(decision))
    else:
        print(
            f"intent {decision.intent_id} resolved: {decision.outcome.value} -> "
            f"{decision.action.value} (by {decision.evidence.get('actor')})"
        )
    return EXIT_OK


async def _resolve(args: argparse.Namespace) -> Any:
    journal = await _journal(args, writing=True)
    try:
        effect = await _effect(journal, args.intent)
        if effect is not None:
            return await _resolve_effect(args, journal, effect)
        entry = await _entry(journal, args.intent)
        resolver, store = _resolver(entry, args, journal)
        try:
            return await resolver.resolve(
                entry.intent.intent_id,
                args.resolution,
                reason=args.reason,
                actor=args.actor,
                override=args.override,
            )
        finally:
            await close_store(store)
    finally:
        await journal.close()


async def _effect(journal: IntentJournal, key: str) -> Effect | None:
    """The tool effect ``key`` names, when it names one (an effect key, not an intent id)."""
    from ..journal.base import EffectJournal

    if not isinstance(journal, EffectJournal):
        return None
    return await journal.effect(key)


async def _resolve_effect(args: argparse.Namespace, journal: Any, effect: Effect) -> Any:
    from ..effects.resolution import resolve_effect

    outcome = "retry" if args.resolution == "replay" else args.resolution
    config = ReconcileConfig(journal=journal)
    # A receipt written here is sealed and signed with the deployment's keys, when given.
    client = JournalClient(effect.session_id, EFFECTS_BACKEND, config, keyring=keyring(args))
    return await resolve_effect(
        client,
        journal,
        effect.key,
        outcome,
        reason=args.reason,
        actor=args.actor,
        output=args.output,
        lease_seconds=ReconcileConfig().lease_seconds,
    )


async def _entry(journal: IntentJournal, intent_id: str) -> JournalEntry:
    entry = await journal.get(intent_id)
    if entry is None:
        settled = await journal.is_settled(intent_id)
        raise ResolutionRefused(
            f"intent {intent_id} is settled already"
            if settled
            else f"no pending intent {intent_id}",
            intent_id=intent_id,
        )
    return entry


def _resolver(
    entry: JournalEntry, args: argparse.Namespace, journal: IntentJournal
) -> tuple[Resolver, Any]:
    """What resolves the intent: a wrapper over its own store (``--store``), which judges it
    and can replay it, or, without a store, the journal alone (nothing judged, nothing
    replayed). Returns the store too, to be closed."""
    intent = entry.intent
    config = ReconcileConfig(journal=journal)
    if args.store is None:
        return Resolver(JournalClient(intent.session_id, intent.backend, config)), None
    from ..session import ReconcilingSession

    store = store_for(
        intent.backend.kind, args.store, intent.session_id, namespace=args.store_namespace
    )
    # The wrapper derives the store's own identity: a store other than the intent's is
    # refused by the resolver, never judged as if it were the intent's.
    return ReconcilingSession(store, config=config).resolver, store


def _repeated(decision: dict[str, Any]) -> str:
    if decision["repeats"] <= 1:
        return ""
    return f"  (x{decision['repeats']}, last {_when(decision['last_seen'])})"


def _owner(intent: dict[str, Any]) -> str:
    host_and_pid = intent["owner"].rsplit("/", 1)[0]
    return f"{host_and_pid} ({'live' if intent['owner_live'] else 'gone'})"


def _json(document: Any) -> None:
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2, default=str).decode())
    sys.stdout.write("\n")


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _age(seconds: float) -> str:
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


def _widths(rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]


def _row(row: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()


def _table(rows: Sequence[Sequence[str]]) -> None:
    widths = _widths(rows)
    for row in rows:
        print(_row(row, widths))


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
            _json({"refused": str(refused)})
        else:
            print(f"refused: {refused}", file=sys.stderr)
        return EXIT_ATTENTION
    if args.json:
        _json(report.to_json())
    else:
        for line in report.lines():
            print(line)
    return EXIT_ATTENTION if report.needs_operator else EXIT_OK
