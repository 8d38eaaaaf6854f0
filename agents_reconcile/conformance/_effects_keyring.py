"""The effects component's contracts on the keyring a session lends its journal
(``journal.effects`` reads with ``journal.keyring``): a receipt's output sealed under a lent key
opens with it and stays sealed to a journal object not lent it, and where the deployment signs,
an effect record it did not sign is refused. An effects component that reads without the lent
keyring answers every sealed receipt with a refusal (the tool's output is lost to recovery),
and, where the deployment signs, takes a forged receipt for one the tool wrote: its output
would vouch for a batch nobody ran."""

from __future__ import annotations

import dataclasses
from typing import Any

from .._core.effect_records import Effect, EffectState
from .._core.sealing import Keyring, PayloadKey
from .._core.signing import Signer, SigningKey
from ..errors import PayloadKeyUnknown, RecordError
from ._core import Subject, contract, fail, refused, require
from ._effects import _require_effects
from ._journal import journal_of, worker
from ._journal_keyring import _FORGING, _LENT, _NOT_LENT, _SIGNING, _lent
from ._records import make_effect

__all__: list[str] = []

_OUTPUT = "charged 5 to the card ending 4242"


async def _lent_effects(subject: Subject, keyring: Keyring) -> Any:
    """The subject's new journal, with effects, holding ``keyring``'s keys."""
    _require_effects(await journal_of(subject))
    return await _lent(subject, keyring)


async def _written(journal: Any, effect: Effect, what: str) -> bool:
    """Begin ``effect`` and store its receipt; whether the journal took both (refusing it with
    a ``RecordError`` when written is as good as refusing it when read)."""
    try:
        await journal.effects.begin(effect)
        await journal.effects.finish(effect.with_receipt(_OUTPUT, at=effect.started_at + 1.0))
    except RecordError:
        return False
    return True


async def _no_receipt_read(journal: Any, effect: Effect, what: str) -> None:
    """``effects.get()`` of ``effect``'s key refuses it (a ``RecordError``), or holds no
    receipt: never an output it could not check."""
    try:
        found = await journal.effects.get(effect.key)
    except RecordError:
        return
    if found is not None and found.state is EffectState.DONE:
        fail(f"effects.get() read {what} back, output and all: {found.output!r}")


@contract("effects")
async def receipts_sealed_with_the_lent_keys_open_with_them(subject: Subject) -> None:
    """The effects component reads with the keys lent to its journal (``journal.keyring``): a
    receipt whose output is sealed under a lent key reads back from ``effects.get()`` and
    ``effects.of_session()`` with its output opened; through another journal object on the
    same data, not lent the key, it is refused (``PayloadKeyUnknown``), never read in the
    clear; and one sealed under a key not lent is refused the same way."""
    key = PayloadKey(_LENT)
    journal = await _lent_effects(subject, Keyring([key]))
    effect = dataclasses.replace(make_effect("sealed-call"), seal_key=key)
    await journal.effects.begin(effect)
    done = effect.with_receipt(_OUTPUT, at=effect.started_at + 1.0)
    stored = await journal.effects.finish(done)
    require(stored.output == _OUTPUT, f"effects.finish() answered the output {stored.output!r}")
    found = await journal.effects.get(effect.key)
    require(
        found is not None and found == done and found.output == _OUTPUT,
        "effects.get() does not give a sealed receipt back with its output opened: "
        + ("nothing" if found is None else repr(found.output)),
    )
    listed = await journal.effects.of_session("session-a")
    require(
        [(e.key, e.output) for e in listed] == [(effect.key, _OUTPUT)],
        "effects.of_session() does not give the sealed receipt back opened",
    )
    other = await worker(subject, journal)
    if other is not journal:
        await refused(
            PayloadKeyUnknown,
            other.effects.get(effect.key),
            "effects.get(), through a journal object not lent the key, of a sealed receipt",
        )
    foreign = dataclasses.replace(
        make_effect("foreign-call", session_id="session-c"), seal_key=PayloadKey(_NOT_LENT)
    )
    if await _written(journal, foreign, "a receipt sealed under a key not lent"):
        await refused(
            PayloadKeyUnknown,
            journal.effects.get(foreign.key),
            "effects.get() of a receipt sealed under a key not lent",
        )
    else:
        await _no_receipt_read(journal, foreign, "a receipt sealed under a key not lent")


@contract("effects")
async def effect_records_the_deployment_did_not_sign_are_refused(subject: Subject) -> None:
    """Where the keyring lent to the journal signs, effects signed under it read back, and an
    effect stored unsigned, or signed under a key the deployment does not hold (a forged or
    edited row), is refused by ``effects.get()`` and ``effects.of_session()`` with a
    ``RecordError`` (``RecordUnsigned``, ``SignatureInvalid``): its receipt never vouches for
    an output."""
    signer = Signer([SigningKey(_SIGNING)])
    keyring = Keyring()
    keyring.add_signer(signer)
    journal = await _lent_effects(subject, keyring)
    signed = dataclasses.replace(make_effect("signed-call"), sign_key=signer.current)
    require(await _written(journal, signed, "a signed effect"), "a signed effect was refused")
    found = await journal.effects.get(signed.key)
    require(
        found is not None and found.state is EffectState.DONE and found.output == _OUTPUT,
        f"a signed receipt does not read back: {found!r}",
    )
    for what, effect in (
        ("an unsigned effect", make_effect("unsigned-call", session_id="session-u")),
        (
            "an effect signed under a key the deployment does not hold",
            dataclasses.replace(
                make_effect("forged-call", session_id="session-f"),
                sign_key=SigningKey(_FORGING),
            ),
        ),
    ):
        if not await _written(journal, effect, what):
            await _no_receipt_read(journal, effect, what)
            continue
        await refused(RecordError, journal.effects.get(effect.key), f"effects.get() of {what}")
        await refused(
            RecordError,
            journal.effects.of_session(effect.session_id),
            f"effects.of_session() of {what}'s session",
        )
