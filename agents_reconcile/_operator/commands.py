"""The operator's commands of ``agents-reconcile``: ``status``, ``show``, ``trail`` and
``resolve``, on any journal address. Each prints a table for a terminal, or with ``--json``
one JSON document; none prints an item's content. Exit codes: 0 fine, 1 something needs an
operator (or a resolution was refused), 2 the journal or store could not be used."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import orjson

from .._backends.journal import IntentJournal, keeps_effects, sets_aside
from .._backends.redaction import redacted
from .._backends.rows import collecting_damage
from .._core.records import BackendIdentity, evidence_text
from .._effects.records import Effect, EffectState
from .._session.config import ReconcileConfig
from .._session.journal_client import JournalClient
from .._session.resolver import Resolver
from .._session.setting_aside import damage_of, row_backend
from ..errors import (
    JournalCorrupt,
    PayloadKeyUnknown,
    RecordError,
    ResolutionRefused,
    UnsupportedRecordVersion,
)
from . import views
from .hints import EFFECT_CHOICES, REASON, as_offered, operator_hints, resolve_hints, show_hint
from .ids import full_id
from .items import item_shapes, sealed_outline
from .journals import opened_journal
from .keys import keyring, payload_keys
from .stores import close_store, recorded_store, store_for
from .waiting import effect_status, effect_view

if TYPE_CHECKING:
    from .._backends.journal import JournalEntry

__all__ = ["EXIT_ATTENTION", "check", "decisions", "resolve", "show", "status", "trail"]

EXIT_OK: Final = 0
EFFECTS_BACKEND: Final = BackendIdentity("agents_reconcile.effects", "")
"""The backend named by decisions about tool effects resolved from the command line."""
EXIT_ATTENTION: Final = 1
_UNREAD: Final = {
    "PayloadKeyUnknown": "SEALED (give the payload keys: --payload-key-file)",
    "UnsupportedRecordVersion": "NEWER (written by a newer release)",
}
"""Rows that cannot be read here but are not damaged, as status labels them."""


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
        label = _UNREAD.get(damaged["error"], "DAMAGED")
        print(
            f"{label} {damaged['kind']} {damaged['id']} (session {damaged['session_id']!r}): "
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
        print(
            f"effect {effect['effect']} ({effect['tool']}, call {effect['call_id']}) has no "
            f"receipt: {waits}; for the evidence: {show_hint(effect['effect'], args)}"
        )
    for aside in found["set_aside"]:
        print(_aside_line(aside))
    for damaged in found["damaged"]:
        print(f"DAMAGED decision under {damaged['id']}: {damaged['problem']}")
    return EXIT_ATTENTION if found["damaged"] else EXIT_OK


def show(args: argparse.Namespace) -> int:
    try:
        found = asyncio.run(_show(args))
    except ResolutionRefused as refused:
        # Unknown, settled, or a store that is not the intent's: said, not a traceback.
        if args.json:
            _json({**_refusal(refused), "intent_id": refused.intent_id})
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
        ident = await full_id(journal, args.intent)
        effect = await _effect(journal, ident)
        if effect is not None:
            return await _show_effect(journal, effect, args)
        try:
            entry = await journal.get(ident)
        except PayloadKeyUnknown as exc:
            return await _show_row(journal, ident, args, sealed=str(exc))
        except UnsupportedRecordVersion:
            raise
        except (RecordError, JournalCorrupt) as exc:
            return await _show_row(journal, ident, args, damaged=str(exc))
        if entry is None:
            aside = await _set_aside_entry(journal, ident)
            if aside is not None:
                with collecting_damage():
                    found = await journal.decisions(intent_id=ident, limit=args.limit)
                return {
                    "intent_id": ident,
                    "set_aside": aside.view(),
                    "decisions": [views.decision_view(d) for d in found],
                }
            entry = await _entry(journal, ident)
        return await _show_intent(journal, entry, args)
    finally:
        await journal.close()


async def _show_effect(
    journal: IntentJournal, effect: Effect, args: argparse.Namespace
) -> dict[str, Any]:
    shown: dict[str, Any] = effect_view(effect)
    if effect.state is EffectState.STARTED:
        # Whether it waits for a person, judged as status judges it.
        lease = ReconcileConfig().lease_seconds
        judged = effect_status(effect, None, time.time(), lease)
        for name in ("owner_live", "runs_again", "needs_operator"):
            shown[name] = judged[name]
        shown["next"] = (
            resolve_hints(effect.key, args, EFFECT_CHOICES) if judged["needs_operator"] else []
        )
    with collecting_damage():
        found = await journal.decisions(intent_id=effect.key, limit=args.limit)
    shown["decisions"] = [views.decision_view(d) for d in found]
    return shown


async def _show_intent(
    journal: IntentJournal, entry: JournalEntry, args: argparse.Namespace
) -> dict[str, Any]:
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
    shown["batch"] = item_shapes(intent)
    store, store_namespace, given = _store_address(entry, args)
    shown["store"] = None if store is None else {"address": redacted(store), "from": given}
    verdict = None
    if store is not None:
        try:
            resolver, opened = _resolver(entry, store, store_namespace, journal)
            try:
                verdict = await resolver.preview(intent.intent_id)
            finally:
                await close_store(opened)
        except ResolutionRefused:
            raise
        except Exception as exc:
            if given == "--store":
                raise
            # The store the record names could not be read here (a password, a server
            # gone): said, and the rest is shown.
            shown["store"]["not_read"] = _one_line(exc)
            store = store_namespace = None
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
    shown["next"] = resolve_hints(
        intent.intent_id,
        args,
        as_offered(shown["resolutions"]),
        store=store,
        store_namespace=store_namespace,
    )
    return shown


async def _show_row(
    journal: IntentJournal,
    ident: str,
    args: argparse.Namespace,
    *,
    damaged: str | None = None,
    sealed: str | None = None,
) -> dict[str, Any]:
    """An intent whose record cannot be read here: damaged (only ``abandon``, which sets it
    aside), or sealed under a key not given (what the seal leaves readable)."""
    raw = await journal.raw_intent(ident) if sets_aside(journal) else None
    if raw is None:
        raise ResolutionRefused(f"intent {ident}: {damaged or sealed}", intent_id=ident)
    with collecting_damage():
        decisions = await journal.decisions(intent_id=ident, limit=args.limit)
    from .._backends.aside import raw_digest

    shown: dict[str, Any] = {
        "intent_id": ident,
        "session_id": raw.session_id,
        "backend": raw.backend,
        "state": raw.state,
        "owner": raw.owner,
        "updated_seconds_ago": round(raw.held_for(time.time()), 3),
        "record": {"size": len(raw.record), "digest": raw_digest(raw.record)},
        "decisions": [views.decision_view(d) for d in decisions],
    }
    if sealed is not None:
        shown["sealed"] = {"problem": sealed, **(sealed_outline(raw.record) or {})}
        shown["next"] = []
        return shown
    shown["damaged"] = damaged
    shown["resolutions"] = {
        "abandon": "set the record aside (its bytes kept in the journal, listed by show and "
        "trail) and let the session run again",
        "committed": "refused: nothing can be judged from a damaged record",
        "replay": "refused: nothing can be replayed from a damaged record",
    }
    shown["next"] = resolve_hints(ident, args, {"abandon": []})
    return shown


async def _set_aside_entry(journal: IntentJournal, ident: str) -> Any:
    if not sets_aside(journal):
        return None
    found = await journal.set_aside_entries(intent_id=ident, limit=1)
    return found[0] if found else None


def _store_address(
    entry: JournalEntry, args: argparse.Namespace
) -> tuple[str | None, str | None, str]:
    """The store to judge the intent against: ``--store`` when given, else the one its record
    names (where it can name one)."""
    if args.store is not None:
        return args.store, args.store_namespace, "--store"
    backend = entry.intent.backend
    found = recorded_store(backend.kind, backend.namespace)
    if found is None:
        return None, None, "none"
    return found[0], found[1], "the intent's record"


def _print_show(found: dict[str, Any]) -> None:
    if "effect" in found:
        for key, value in found.items():
            if key not in ("decisions", "next"):
                print(f"{key:<17} {value}")
        for decision in found["decisions"]:
            print(
                f"decision          {_when(decision['decided_at'])}  {decision['reason']} -> "
                f"{decision['action']}{_repeated(decision)}"
            )
        _print_next(found.get("next", []))
        return
    if "set_aside" in found:
        print(_aside_line(found["set_aside"]))
        _print_decisions(found["decisions"])
        return
    if "record" in found:
        _print_row(found)
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
    print("\nthe batch (no content: kinds, tools, call ids, sizes):")
    for item in found["batch"]:
        print("    " + _item_line(item))
    print("\nthe store now:")
    now = found["store_now"]
    if now is None:
        where = found["store"]
        why = f" ({where['address']}: {where['not_read']})" if where and "not_read" in where else ""
        print(f"    not read{why}; give --store ADDRESS to judge the intent against it")
    else:
        print(f"    read from {found['store']['address']} (named by {found['store']['from']})")
        print(f"    {now['outcome']} ({now['reason']}): {now['explanation']}")
        print(f"    evidence: {evidence_text(now['evidence'])}")
    _print_decisions(found["decisions"])
    print("\nwhat each resolution would do:")
    for name, said in found["resolutions"].items():
        print(f"    --as {name:<9} {said}")
    _print_next(found["next"])


def _print_row(found: dict[str, Any]) -> None:
    record = found["record"]
    print(f"intent   {found['intent_id']}")
    print(f"session  {found['session_id']}   backend {found['backend']}   (as its row says)")
    print(f"state    {found['state']}, owner {found['owner']}")
    print(f"record   {record['size']} bytes, {record['digest']}")
    if "sealed" in found:
        sealed = found["sealed"]
        print(f"\nsealed: {sealed['problem']}")
        if sealed.get("items") is not None:
            print(
                f"    {sealed['items']} item(s), sealed under {sealed.get('sealed_under')}: "
                f"{evidence_text({'batch': sealed['batch_digests']})} (unverified)"
            )
        print("    give the deployment's payload keys (--payload-key-file PATH) to see more")
    else:
        print(f"\nDAMAGED: {found['damaged']}")
    _print_decisions(found["decisions"])
    if "resolutions" in found:
        print("\nwhat each resolution would do:")
        for name, said in found["resolutions"].items():
            print(f"    --as {name:<9} {said}")
    _print_next(found["next"])


def _print_decisions(decisions: list[dict[str, Any]]) -> None:
    print("\ndecisions (newest first):")
    for decision in decisions:
        print(
            f"    {_when(decision['decided_at'])}  {decision['outcome']} ({decision['reason']}) "
            f"-> {decision['action']}{_repeated(decision)}"
        )
    if not decisions:
        print("    none yet")


def _print_next(lines: list[str]) -> None:
    if not lines:
        return
    print(f"\nto resolve it (replace {REASON!r} with what you checked):")
    for line in lines:
        print(f"    {line}")


def _item_line(item: dict[str, Any]) -> str:
    named = "  ".join(
        f"{key}={item[key]}" for key in ("type", "role", "name", "call_id", "status") if key in item
    )
    return f"{item['position']}. {named}  {item['size']} B  {item['digest'][:12]}"


def _aside_line(aside: dict[str, Any]) -> str:
    return (
        f"SET ASIDE intent {aside['intent_id']} (session {aside['session_id']!r}) on "
        f"{_when(aside['set_aside_at'])} by {aside['actor']} ({aside['reason']}): its record "
        f"kept, {aside['size']} bytes, {aside['digest']}; refused because: {aside['problem']}"
    )


def resolve(args: argparse.Namespace) -> int:
    try:
        decision = asyncio.run(_resolve(args))
    except ResolutionRefused as refused:
        if args.json:
            _json(
                {
                    **_refusal(refused),
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
        ident = await full_id(journal, args.intent)
        if ident != args.intent.strip():
            # A resolution writes: it is never made on an id completed from a prefix, which
            # could name another intent than the one the operator looked at.
            raise ResolutionRefused(
                f"{args.intent!r} is not a whole id; it begins {ident}: give the whole id "
                "(show prints it)",
                intent_id=args.intent,
            )
        effect = await _effect(journal, ident)
        if effect is not None:
            return await _resolve_effect(args, journal, effect)
        if await damage_of(journal, ident) is not None and sets_aside(journal):
            raw = await journal.raw_intent(ident)
            if raw is not None:
                # Only abandon clears it (set aside, its bytes kept); the resolver says so.
                client = JournalClient(
                    raw.session_id, row_backend(raw), ReconcileConfig(journal=journal)
                )
                return await Resolver(client).resolve(
                    ident, args.resolution, reason=args.reason, actor=args.actor
                )
        entry = await _entry(journal, ident)
        resolver, store = _resolver(entry, args.store, args.store_namespace, journal)
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

    if not keeps_effects(journal):
        return None
    return await journal.effect(key)


async def _resolve_effect(args: argparse.Namespace, journal: Any, effect: Effect) -> Any:
    from .._effects.resolve_effect import resolve_effect

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
    entry: JournalEntry, address: str | None, namespace: str | None, journal: IntentJournal
) -> tuple[Resolver, Any]:
    """What resolves the intent: a wrapper over its own store (``--store``), which judges it
    and can replay it, or, without a store, the journal alone (nothing judged, nothing
    replayed). Returns the store too, to be closed."""
    intent = entry.intent
    config = ReconcileConfig(journal=journal)
    if address is None:
        return Resolver(JournalClient(intent.session_id, intent.backend, config)), None
    from .._session.session import ReconcilingSession

    store = store_for(intent.backend.kind, address, intent.session_id, namespace=namespace)
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


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _refusal(refused: Exception) -> dict[str, Any]:
    """A refusal under ``--json``: the error's fields every command's errors have, and
    ``refused`` (its text) as before."""
    text = str(refused)
    return {"error": text, "kind": type(refused).__name__, "exit": EXIT_ATTENTION, "refused": text}


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
            _json(_refusal(refused))
        else:
            print(f"refused: {refused}", file=sys.stderr)
        return EXIT_ATTENTION
    if args.json:
        _json(report.to_json())
    else:
        for line in report.lines():
            print(line)
    return EXIT_ATTENTION if report.needs_operator else EXIT_OK
