"""``show``: one pending intent, tool effect or set-aside record in full: what the write was
meant to do, the shapes of its items (never their content), what its store holds now, its
decisions, and what each resolution would do, with the commands that make it. A settled intent
is shown after the fact: how it was settled, when, by whom, and the evidence; an id that names
nothing is ``NotFound``."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import TYPE_CHECKING, Any

from .._backends.aside import SetAside, raw_digest
from .._backends.journal import IntentJournal
from .._backends.redaction import redacted
from .._backends.rows import collecting_damage
from .._core.effect_records import Effect, EffectState
from .._core.explanations import evidence_text
from .._core.records import Decision, Reason
from .._session.config import ReconcileConfig
from ..errors import (
    JournalCorrupt,
    PayloadKeyUnknown,
    RecordError,
    ResolutionRefused,
    UnsupportedRecordVersion,
)
from . import views
from .hints import EFFECT_CHOICES, OUTPUT, REASON, as_offered, resolve_hints, trail_hint
from .ids import full_id
from .items import item_shapes, sealed_outline
from .journals import command_journal
from .output import (
    EXIT_ATTENTION,
    EXIT_OK,
    age_text,
    aside_line,
    evidence_line,
    moment,
    print_json,
    refusal,
    repeats_text,
    utc_time,
)
from .resolving import find_effect, one_line, resolver_for, store_address, unknown_id
from .stores import close_store, usable_store
from .waiting import effect_status, effect_view

if TYPE_CHECKING:
    from .._backends.journal import JournalEntry

__all__ = ["show"]


def show(args: argparse.Namespace) -> int:
    try:
        found = asyncio.run(_show(args))
    except ResolutionRefused as refused:
        # Unknown, settled, or a store that is not the intent's: said, not a traceback.
        if args.json:
            print_json({**refusal(refused), "intent_id": refused.intent_id})
        else:
            print(f"{refused}", file=sys.stderr)
        return EXIT_ATTENTION
    if args.json:
        print_json(found)
    else:
        _print_show(found)
    return EXIT_OK


async def _show(args: argparse.Namespace) -> dict[str, Any]:
    journal = await command_journal(args)
    try:
        ident = await full_id(journal, args.intent)
        effect = await find_effect(journal, ident)
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
                    "kept": await _kept_bytes(journal, aside),
                    "decisions": [views.decision_view(d) for d in found],
                }
            if await journal.is_settled(ident):
                return await _show_settled(journal, ident, args)
            raise unknown_id(ident, args)
        return await _show_intent(journal, entry, args)
    finally:
        await journal.close()


async def _show_settled(
    journal: IntentJournal, ident: str, args: argparse.Namespace
) -> dict[str, Any]:
    """A settled intent, after the fact: the decision that settled it (outcome, reason, the
    action taken, when, by whom: the operator and their reason, or the rule alone) and its
    evidence, with every decision about it. Its record went when it settled: what the journal
    keeps of it is in its decisions. Nothing is left to resolve."""
    with collecting_damage():
        found = await journal.decisions(intent_id=ident, limit=args.limit)
    settling = next((decision for decision in found if decision.settled), None)
    about = settling or (found[0] if found else None)
    shown: dict[str, Any] = {
        "intent_id": ident,
        "session_id": None if about is None else about.session_id,
        "backend": None if about is None else str(about.backend),
        "state": "settled",
        "settled": None if settling is None else _settlement(settling),
        "decisions": [views.decision_view(d) for d in found],
        "next": [],
    }
    if about is not None:
        shown["trail_command"] = trail_hint(about.session_id, args)
    return shown


def _settlement(decision: Decision) -> dict[str, Any]:
    """How a decision settled its intent, and who settled it: an operator (``by``: the actor,
    the resolution and the reason they gave) or the rule (``by``: None)."""
    evidence = decision.evidence
    operator = decision.reason is Reason.OPERATOR_RESOLVED or "resolution" in evidence
    return {
        **views.decision_view(decision),
        "by": (
            {
                "actor": evidence.get("actor"),
                "resolution": evidence.get("resolution"),
                "reason": evidence.get("operator_reason"),
                "override": bool(evidence.get("override", False)),
            }
            if operator
            else None
        ),
    }


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
    store, store_namespace, given = store_address(entry, args)
    shown["store"] = None if store is None else {"address": redacted(store), "from": given}
    verdict = None
    if store is not None:
        try:
            resolver, opened = resolver_for(entry, store, store_namespace, journal)
            try:
                await usable_store(opened, store)
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
            shown["store"]["not_read"] = one_line(exc)
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
    raw = None if journal.aside is None else await journal.aside.raw(ident)
    if raw is None:
        raise ResolutionRefused(f"intent {ident}: {damaged or sealed}", intent_id=ident)
    with collecting_damage():
        decisions = await journal.decisions(intent_id=ident, limit=args.limit)
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
    if journal.aside is None:
        return None
    found = await journal.aside.entries(intent_id=ident, limit=1)
    return found[0] if found else None


async def _kept_bytes(journal: IntentJournal, aside: SetAside) -> dict[str, Any]:
    """Whether the bytes set aside are still held as the entry describes them: their size and
    digest, never their content (sealed bytes stay sealed, and a damaged record may hold
    payload in the clear)."""
    assert journal.aside is not None
    record = await journal.aside.kept(aside.intent_id)
    if record is None:
        return {"held": False}
    digest = raw_digest(record)
    return {
        "held": True,
        "size": len(record),
        "digest": digest,
        "intact": (len(record), digest) == (aside.size, aside.digest),
    }


def _print_show(found: dict[str, Any]) -> None:
    if "effect" in found:
        for key, value in found.items():
            if key not in ("decisions", "next"):
                print(f"{key:<17} {moment(value) if key.endswith('_at') else value}")
        for decision in found["decisions"]:
            print(
                f"decision          {utc_time(decision['decided_at'])}  {decision['reason']} -> "
                f"{decision['action']}{repeats_text(decision)}"
            )
        _print_next(found.get("next", []))
        return
    if "set_aside" in found:
        print(aside_line(found["set_aside"]))
        print(_kept_line(found["kept"]))
        _print_decisions(found["decisions"])
        return
    if "record" in found:
        _print_row(found)
        return
    if found["state"] == "settled":
        _print_settled(found)
        return
    print(f"intent   {found['intent_id']}")
    print(f"session  {found['session_id']}   backend {found['backend']}")
    live = "live" if found["owner_live"] else "gone"
    age = age_text(found["age_seconds"])
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
        print(f"    evidence: {evidence_line(now['evidence'])}")
    _print_decisions(found["decisions"])
    print("\nwhat each resolution would do:")
    for name, said in found["resolutions"].items():
        print(f"    --as {name:<9} {said}")
    _print_next(found["next"])


def _print_settled(found: dict[str, Any]) -> None:
    print(f"intent   {found['intent_id']}")
    if found["session_id"] is not None:
        print(f"session  {found['session_id']}   backend {found['backend']}")
    settled = found["settled"]
    if settled is None:
        print("state    settled (the decision that settled it is no longer kept)")
    else:
        print(
            f"state    settled {utc_time(settled['decided_at'])}: {settled['outcome']} "
            f"({settled['reason']}) -> {settled['action']}"
        )
        print(f"         {settled['explanation']}")
        by = settled["by"]
        if by is None:
            print("by       the rule (reconciliation), no operator")
        else:
            how = f"--as {by['resolution']}" + (" --override" if by["override"] else "")
            print(f"by       {by['actor']}, an operator ({how}): {by['reason']}")
        print(f"evidence {evidence_line(settled['evidence'])}")
    _print_decisions(found["decisions"])
    if "trail_command" in found:
        print(f"\nthe session's decisions: {found['trail_command']}")


def _kept_line(kept: dict[str, Any]) -> str:
    if not kept["held"]:
        return "bytes    MISSING: the journal holds no bytes for this entry"
    said = "as the entry describes them" if kept["intact"] else "CHANGED since they were set aside"
    return f"bytes    held, {kept['size']} bytes, {kept['digest']}: {said}"


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
            f"    {utc_time(decision['decided_at'])}  {decision['outcome']} ({decision['reason']}) "
            f"-> {decision['action']}{repeats_text(decision)}"
        )
    if not decisions:
        print("    none yet")


def _print_next(lines: list[str]) -> None:
    if not lines:
        return
    # Each placeholder is refused as given (``placeholders``): the heading says what replaces it.
    output = any(OUTPUT in line for line in lines)
    also = f", and {OUTPUT!r} with the output the system shows" if output else ""
    print(f"\nto resolve it (replace {REASON!r} with what you checked{also}):")
    for line in lines:
        print(f"    {line}")


def _item_line(item: dict[str, Any]) -> str:
    named = "  ".join(
        f"{key}={item[key]}" for key in ("type", "role", "name", "call_id", "status") if key in item
    )
    # Counted from 1 for people; the JSON's ``position`` counts from 0.
    return f"{item['position'] + 1}. {named}  {item['size']} B  {item['digest'][:12]}"
