"""Signed records: what a run carries through a client comes back only as this deployment wrote it.

An application round-trips ``RunState.to_string()`` through clients (an approval screen, a
mobile app), so the copy under ``context["agents_reconcile"]`` is input from whoever held the
state. With a signing key (``ReconcileConfig(signing_key=...)`` or, when the configuration names
none, ``AGENTS_RECONCILE_SIGNING_KEY``) every carried intent and every seen write count holds a
keyed MAC (blake3's keyed mode) under that key, and a copy whose MAC is missing or wrong is refused
before anything reads it further, let alone writes it to the journal.

- The key is derived from the configured secret material (at least 32 bytes, raw or base64),
  so the same material used elsewhere is never used as is.
- The key id (``kid``) is derived from the key: a signature names its key and nothing about it.
  A signer holds the key that signs (the first) and older keys that still verify: rotating is
  putting a new key first and dropping the old one once no state signed with it is in use.
- Each MAC covers a domain (what kind of thing is signed) and the thing's own bytes, so a
  signature moved to another field or another record does not verify.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping
from typing import Any, Final

from blake3 import blake3

from ..errors import ConfigurationError, RecordUnsigned, SignatureInvalid
from .sealing import DerivedKey, configured_keys

__all__ = ["SIGNING_KEY_ENV", "Signer", "SigningKey", "signer_for", "signing_keys"]

SIGNING_KEY_ENV: Final = "AGENTS_RECONCILE_SIGNING_KEY"
"""Signing keys for a process whose configuration names none: base64 keys, comma-separated,
the first signing."""
_TAG_BYTES: Final = 16
_KEY_CONTEXT: Final = "agents-reconcile 2026-12-01 signing key"
_KID_CONTEXT: Final = "agents-reconcile 2026-12-01 signing key id"


class SigningKey(DerivedKey):
    """A key that signs what leaves the process (``DerivedKey``)."""

    __slots__ = ()

    def __init__(self, material: bytes | str) -> None:
        super().__init__(
            material, what="a signing key", key_context=_KEY_CONTEXT, kid_context=_KID_CONTEXT
        )

    def signature(self, domain: str, data: bytes) -> dict[str, str]:
        """``{"kid", "mac"}``: the MAC of ``data`` under this key, and the key's id."""
        return {"kid": self.key_id, "mac": self.mac(domain, data)}

    def mac(self, domain: str, data: bytes) -> str:
        hasher = blake3(key=self._key)
        hasher.update(domain.encode("utf-8"))
        hasher.update(b"\x00")
        hasher.update(data)
        return hasher.hexdigest(length=_TAG_BYTES)


class Signer:
    """The keys one wrapper signs with (the first) and verifies with (all of them)."""

    __slots__ = ("_keys", "current")

    def __init__(self, keys: Iterable[SigningKey]) -> None:
        self._keys: dict[str, SigningKey] = {}
        self.add(keys)
        if not self._keys:
            raise ConfigurationError("a signer needs at least one signing key")
        self.current: SigningKey = next(iter(self._keys.values()))

    def add(self, keys: Iterable[SigningKey]) -> None:
        """Verify with ``keys`` too (the signing key stays the first one given)."""
        for key in keys:
            self._keys.setdefault(key.key_id, key)

    def keys(self) -> list[SigningKey]:
        return list(self._keys.values())

    def copy(self) -> Signer:
        """A signer of its own with the same keys (adding to it leaves this one as it is)."""
        return Signer(self.keys())

    def __repr__(self) -> str:
        return f"Signer(key_ids={list(self._keys)!r})"

    def sign(self, domain: str, data: bytes) -> dict[str, str]:
        return self.current.signature(domain, data)

    def verify(self, domain: str, data: bytes, signature: Any, *, what: str) -> None:
        """Raise ``RecordUnsigned`` (no signature, or one under a key this signer does not
        hold) or ``SignatureInvalid`` (a signature that does not verify)."""
        if signature is None:
            raise RecordUnsigned(f"{what} carries no signature, and this deployment signs")
        if not (
            isinstance(signature, Mapping)
            and isinstance(signature.get("kid"), str)
            and isinstance(signature.get("mac"), str)
        ):
            raise SignatureInvalid(f"{what}: its signature is not a signature")
        key = self._keys.get(signature["kid"])
        if key is None:
            raise RecordUnsigned(
                f"{what} is signed under key {signature['kid']!r}, which this deployment does "
                "not hold (an old key dropped from signing_key, or another deployment's)",
                key_id=signature["kid"],
            )
        if not hmac.compare_digest(key.mac(domain, data), signature["mac"]):
            raise SignatureInvalid(
                f"{what}: the signature does not verify under key {key.key_id}: it was edited, "
                "or moved from another record"
            )


def signing_keys(value: Any) -> tuple[SigningKey, ...]:
    """``ReconcileConfig.signing_key`` as keys: one key (bytes, base64 text or a
    ``SigningKey``) or a sequence of them, the first signing."""
    return configured_keys(value, SigningKey, "signing_key")


def signer_for(
    configured: tuple[SigningKey, ...], environ: Mapping[str, str] | None = None
) -> Signer | None:
    """The signer of a wrapper: the configured keys, else those of ``SIGNING_KEY_ENV``, else
    None. A variable that is set but holds no valid key is refused, never ignored."""
    if configured:
        return Signer(configured)
    text = (os.environ if environ is None else environ).get(SIGNING_KEY_ENV)
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise ConfigurationError(f"{SIGNING_KEY_ENV} is set but holds no key")
    try:
        return Signer(SigningKey(part) for part in parts)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{SIGNING_KEY_ENV}: {exc}") from None
