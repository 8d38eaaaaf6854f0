"""The ``IntentJournal`` contracts on the keyring a session lends its journal: a journal that
stores records opens and checks them with the keys of every session using it (``keyring``, a
``Keyring``), so that a sealed batch opens for recovery and a record the deployment did not
sign is refused, never replayed. A journal that reads its records without the lent keyring
denies every recovery of a sealed session, and, where the deployment signs, replays a forged
row into history."""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from .._core.records import PendingWrite
from .._core.sealing import Keyring, PayloadKey
from .._core.signing import Signer, SigningKey
from .._session.journal_client import lend_keys
from ..errors import ConfigurationError, PayloadKeyUnknown, RecordError
from ._core import Subject, contract, fail, refused, require
from ._journal import FAILED, IN_FLIGHT, ids, journal_of
from ._records import ME, make_intent

__all__: list[str] = []

# Key material for the checks alone (32 bytes each): what they seal or sign means nothing
# outside them.
_LENT: Final = b"conformance payload key, lent..."
_NOT_LENT: Final = b"conformance payload key, not lent"
_SIGNING: Final = b"conformance signing key, trusted."
_FORGING: Final = b"conformance signing key, forged.."


async def _lent(subject: Subject, keyring: Keyring) -> Any:
    """The subject's new journal, holding ``keyring``'s keys as a session lends them."""
    journal = await journal_of(subject)
    try:
        lend_keys(journal, keyring)
    except ConfigurationError as exc:
        fail(
            "it has no keyring (a Keyring as its attribute keyring, which its reads decode "
            "records with: PendingWrite.decode(record, self.keyring)), so a session that seals "
            f"or signs refuses it: {exc}"
        )
    return journal


def _sealed(intent: PendingWrite, key: PayloadKey) -> PendingWrite:
    return dataclasses.replace(intent, seal_key=key)


def _signed(intent: PendingWrite, key: SigningKey) -> PendingWrite:
    return dataclasses.replace(intent, sign_key=key)


async def _recorded_or_refused(journal: Any, intent: PendingWrite, what: str) -> bool:
    """Record ``intent``; whether the journal took it (refusing it with a ``RecordError``
    already, when it is written, is as good as refusing it when it is read)."""
    try:
        await journal.record(intent, state=FAILED, owner=ME)
    except RecordError:
        require(await _absent(journal, intent), f"{what} was refused, yet read back")
        return False
    return True


async def _absent(journal: Any, intent: PendingWrite) -> bool:
    try:
        return await journal.get(intent.intent_id) is None
    except RecordError:
        return True


@contract("journal")
async def records_sealed_with_the_lent_keys_open_with_them(subject: Subject) -> None:
    """The journal takes the keys a session lends it (its ``keyring``, a ``Keyring``: a
    journal without one is refused with ``ConfigurationError`` by a session that seals or
    signs): intents sealed under a lent key read back from ``get()`` and ``pending()`` with
    their batch opened, and one sealed under a key it was not lent is refused
    (``PayloadKeyUnknown``), never read as anything else."""
    key = PayloadKey(_LENT)
    journal = await _lent(subject, Keyring([key]))
    recorded = _sealed(make_intent("k-1"), key)
    await journal.record(recorded, state=FAILED, owner=ME)
    opened = _sealed(make_intent("k-2", session_id="session-b", text="opened"), key)
    await journal.open_intent(opened, state=IN_FLIGHT, owner=ME)
    for intent in (recorded, opened):
        name, session = intent.intent_id, intent.session_id
        entry = await journal.get(name)
        require(entry is not None, f"get({name!r}) of a sealed intent found nothing")
        require(entry.intent == intent, f"get({name!r}) gives a sealed intent back changed")
        require(
            entry.intent.batch == intent.batch,
            f"get({name!r}) gives the batch {entry.intent.batch!r}, not the one sealed",
        )
        listed = await journal.pending(session)
        require(ids(listed) == [name], f"pending({session!r}) lists {ids(listed)}, not [{name!r}]")
        require(listed[0].intent == intent, f"pending({session!r}) gives the intent changed")
    foreign = _sealed(make_intent("k-3", session_id="session-c"), PayloadKey(_NOT_LENT))
    if await _recorded_or_refused(journal, foreign, "an intent sealed under a key not lent"):
        await refused(
            PayloadKeyUnknown, journal.get("k-3"), "get() of an intent sealed under a key not lent"
        )
        await refused(
            PayloadKeyUnknown,
            journal.pending("session-c"),
            "pending() of a session whose intent is sealed under a key not lent",
        )


@contract("journal")
async def records_the_deployment_did_not_sign_are_refused(subject: Subject) -> None:
    """Where the keyring lent to the journal signs, intents signed under it read back, and an
    intent stored unsigned, or signed under a key the deployment does not hold (a forged or
    edited row), is refused by ``get()`` and ``pending()`` with a ``RecordError``
    (``RecordUnsigned``, ``SignatureInvalid``): never read as a pending write, so never
    replayed."""
    signer = Signer([SigningKey(_SIGNING)])
    keyring = Keyring()
    keyring.add_signer(signer)
    journal = await _lent(subject, keyring)
    signed = _signed(make_intent("g-1"), signer.current)
    await journal.record(signed, state=FAILED, owner=ME)
    entry = await journal.get("g-1")
    require(entry is not None and entry.intent == signed, "a signed intent does not read back")
    listed = await journal.pending("session-a")
    require(ids(listed) == ["g-1"], f"pending('session-a') lists {ids(listed)}, not ['g-1']")
    for what, intent in (
        ("an unsigned intent", make_intent("u-1", session_id="session-u", text="unsigned")),
        (
            "an intent signed under a key the deployment does not hold",
            _signed(
                make_intent("f-1", session_id="session-f", text="forged"),
                SigningKey(_FORGING),
            ),
        ),
    ):
        if not await _recorded_or_refused(journal, intent, what):
            continue
        name, session = intent.intent_id, intent.session_id
        await refused(RecordError, journal.get(name), f"get() of {what}")
        await refused(RecordError, journal.pending(session), f"pending() of {what}'s session")
