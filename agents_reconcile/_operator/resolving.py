"""``resolve``: an operator's resolution of a pending intent, of a damaged one (abandoned, its
record set aside) or of a tool effect whose outcome is unknown. What finds them is shared with
``show``, which previews what each resolution would do."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any, Final

from .._backends.journal import IntentJournal
from .._backends.redaction import redacted
from .._core.effect_records import Effect
from .._core.records import BackendIdentity
from .._session.config import ReconcileConfig
from .._session.journal_client import JournalClient
from .._session.resolver import Resolver
from .._session.setting_aside import damage_of, row_backend
from ..errors import ResolutionRefused
from . import views
from .hints import show_hint
from .ids import full_id
from .journals import command_journal, journal_named
from .keys import keyring
from .output import EXIT_ATTENTION, EXIT_OK, print_json, refusal
from .presence import NotFound
from .stores import close_store, recorded_store, store_for, usable_store

if TYPE_CHECKING:
    from .._backends.journal import JournalEntry

__all__ = [
    "EFFECTS_BACKEND",
    "find_effect",
    "judging_resolver",
    "one_line",
    "pending_entry",
    "resolve",
    "resolver_for",
    "store_address",
    "unknown_id",
]

EFFECTS_BACKEND: Final = BackendIdentity("agents_reconcile.effects", "")
"""The backend named by decisions about tool effects resolved from the command line."""


def resolve(args: argparse.Namespace) -> int:
    unread: dict[str, Any] = {}
    try:
        decision = asyncio.run(_resolve(args, unread))
    except ResolutionRefused as refused:
        if args.json:
            print_json(
                {
                    **refusal(refused),
                    "intent_id": refused.intent_id,
                    "evidence": refused.evidence,
                }
            )
        else:
            print(f"refused: {refused}", file=sys.stderr)
        return EXIT_ATTENTION
    if args.json:
        print_json({**views.decision_view(decision), **({"store": unread} if unread else {})})
    else:
        print(
            f"intent {decision.intent_id} resolved: {decision.outcome.value} -> "
            f"{decision.action.value} (by {decision.evidence.get('actor')})"
        )
        if unread:
            print(f"note: {unread_text(unread)}", file=sys.stderr)
    return EXIT_OK


def unread_text(unread: dict[str, Any]) -> str:
    """What an operator is told of a resolution made without reading the store."""
    if unread.get("address") is None:
        why = "the intent's record names no store this command can open"
    else:
        why = f"{unread['address']} (named by the intent's record) could not be read: " + str(
            unread["problem"]
        )
    return (
        f"the store was not read ({why}): the resolution rests on your word alone, nothing "
        "was judged; give --store ADDRESS to have it judged against the store"
    )


async def _resolve(args: argparse.Namespace, unread: dict[str, Any]) -> Any:
    journal = await command_journal(args, writing=True)
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
        effect = await find_effect(journal, ident)
        if effect is not None:
            return await _resolve_effect(args, journal, effect)
        if await damage_of(journal, ident) is not None and journal.aside is not None:
            raw = await journal.aside.raw(ident)
            if raw is not None:
                # Only abandon clears it (set aside, its bytes kept); the resolver says so.
                client = JournalClient(
                    raw.session_id, row_backend(raw), ReconcileConfig(journal=journal)
                )
                return await Resolver(client).resolve(
                    ident, args.resolution, reason=args.reason, actor=args.actor
                )
        entry = await pending_entry(journal, ident, args)
        address, namespace, given = store_address(entry, args)
        resolver, store = await judging_resolver(entry, address, namespace, given, journal, unread)
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


async def find_effect(journal: IntentJournal, key: str) -> Effect | None:
    """The tool effect ``key`` names, when it names one (an effect key, not an intent id)."""

    if journal.effects is None:
        return None
    return await journal.effects.get(key)


async def _resolve_effect(args: argparse.Namespace, journal: Any, effect: Effect) -> Any:
    from .._effects.resolve_effect import resolve_effect

    outcome = "retry" if args.resolution == "replay" else args.resolution
    config = ReconcileConfig(journal=journal)
    # A receipt written here is sealed and signed with the deployment's keys, when given.
    client = JournalClient(effect.session_id, EFFECTS_BACKEND, config, keyring=keyring(args))
    return await resolve_effect(
        client,
        journal.effects,
        effect.key,
        outcome,
        reason=args.reason,
        actor=args.actor,
        output=args.output,
        lease_seconds=ReconcileConfig().lease_seconds,
    )


async def pending_entry(
    journal: IntentJournal, intent_id: str, args: argparse.Namespace
) -> JournalEntry:
    """The pending intent ``intent_id``: ``ResolutionRefused`` when it is settled (naming the
    ``show`` that says how), ``NotFound`` when the journal (the one ``args`` name) holds
    nothing by that id."""
    entry = await journal.get(intent_id)
    if entry is None:
        if await journal.is_settled(intent_id):
            raise ResolutionRefused(
                f"intent {intent_id} is settled already: nothing to resolve; how it was "
                f"settled, and by whom: {show_hint(intent_id, args)}",
                intent_id=intent_id,
            )
        raise unknown_id(intent_id, args)
    return entry


def unknown_id(ident: str, args: argparse.Namespace) -> NotFound:
    """``NotFound`` for an id that names nothing in the journal ``args`` name."""
    return NotFound(
        f"nothing by the id {ident!r} in journal {journal_named(args)}: no intent (pending or "
        "settled), tool effect or set-aside record has it",
        what="id",
        name=ident,
    )


def store_address(
    entry: JournalEntry, args: argparse.Namespace
) -> tuple[str | None, str | None, str]:
    """The store to judge the intent against: ``--store`` when given, else the one its record
    names (where it can name one); and which of them (``--store``, ``the intent's record``,
    ``none``)."""
    if args.store is not None:
        return args.store, args.store_namespace, "--store"
    found = recorded_store(entry.intent.backend)
    if found is None:
        return None, None, "none"
    return found[0], found[1], "the intent's record"


async def judging_resolver(
    entry: JournalEntry,
    address: str | None,
    namespace: str | None,
    given: str,
    journal: IntentJournal,
    unread: dict[str, Any],
) -> tuple[Resolver, Any]:
    """``resolver_for`` the store ``store_address`` found, once a first judgement shows it can
    be read. A store given with ``--store`` that cannot be read is an error; one the record
    names that cannot be read (a password, a server gone) leaves the journal alone to
    resolve, and ``unread`` says why (nothing is judged: ``replay`` is refused)."""
    if address is not None:
        store = None
        try:
            resolver, store = resolver_for(entry, address, namespace, journal)
            await usable_store(store, address)
            await resolver.preview(entry.intent.intent_id)
        except ResolutionRefused:
            await close_store(store)
            raise
        except Exception as exc:
            await close_store(store)
            if given == "--store":
                raise
            unread.update(address=redacted(address), problem=one_line(exc))
        else:
            return resolver, store
    else:
        unread.update(address=None, problem="no store address in the intent's record")
    return resolver_for(entry, None, None, journal)


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and its message."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def resolver_for(
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
