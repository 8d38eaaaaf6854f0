"""Sealed payloads: the items a record holds, encrypted at rest when the session's store is.

A wrapped session that encrypts (the SDK's ``EncryptedSession`` anywhere in the chain) or a
``ReconcileConfig(payload_key=...)`` gives the wrapper a ``Keyring``. Every record that holds
items (a pending write's batch) then carries them sealed with authenticated encryption
(ChaCha20-Poly1305 from ``cryptography``), in every journal and in the RunState copy. What
stays readable is what the rule compares: ids, counts, times and blake3 digests.

- The key id (``kid``) is derived from the key, so a record names the key that opens it and
  nothing about the key itself. A keyring holds the key that seals (the first) and any older
  ones that still open what they sealed: rotating is adding a new first key.
- The associated data is the record's own digest, which covers every readable field (the
  batch's digests included): a sealed batch moved to another record does not open.
- A seal that does not open under the key it names is ``RecordTampered``; a key id the
  keyring does not hold is ``PayloadKeyUnknown``. Neither is ever guessed past.
"""

from __future__ import annotations

import base64
import binascii
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

from blake3 import blake3

from ..errors import ConfigurationError, PayloadKeyUnknown, RecordMalformed, RecordTampered

if TYPE_CHECKING:
    from .signing import Signer

__all__ = [
    "ALGORITHM",
    "SESSION_KEYS",
    "DerivedKey",
    "Keyring",
    "PayloadKey",
    "configured_keys",
    "key_material",
    "keyring_for",
]

ALGORITHM: Final = "chacha20-poly1305"
"""The only sealing algorithm this release writes and reads."""
_NONCE_BYTES: Final = 12
_MIN_MATERIAL: Final = 32
_KEY_CONTEXT: Final = "agents-reconcile 2026-12-01 payload key"
_KID_CONTEXT: Final = "agents-reconcile 2026-12-01 payload key id"
_FROM_ENCRYPTED_SESSION: Final = "agents-reconcile 2026-12-01 payload key from EncryptedSession"
_ENCRYPTED_SESSION_MODULE: Final = "agents.extensions.memory.encrypt_session"


def _aead(key: bytes) -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "sealing payloads needs the 'cryptography' package: install agents-reconcile[encrypt]"
        ) from exc
    return ChaCha20Poly1305(key)


class DerivedKey:
    """A key derived from secret material (at least 32 bytes, raw or base64 text), so the same
    material used elsewhere is never used as is; known by an id derived from the key, which it
    is equal by and shown by (never the material or the key)."""

    __slots__ = ("_key", "key_id")

    def __init__(
        self, material: bytes | str, *, what: str, key_context: str, kid_context: str
    ) -> None:
        raw = key_material(material, what=what)
        if len(raw) < _MIN_MATERIAL:
            raise ConfigurationError(
                f"{what} needs at least {_MIN_MATERIAL} bytes of secret material, not {len(raw)}"
            )
        self._key = blake3(raw, derive_key_context=key_context).digest()
        self.key_id: str = blake3(self._key, derive_key_context=kid_context).hexdigest()[:16]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(key_id={self.key_id!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.key_id == self.key_id

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.key_id))


SESSION_KEYS: Final = "encrypted-session"
"""How a journal's sealing mark names the keys derived from each session's own
``EncryptedSession`` key (one per session: the mark names them all at once)."""


class PayloadKey(DerivedKey):
    """A key that seals payloads (``DerivedKey``). ``mark``: how a journal's sealing mark
    names it (its id; ``SESSION_KEYS`` for a key derived from an ``EncryptedSession``)."""

    __slots__ = ("_cipher", "mark")

    def __init__(self, material: bytes | str) -> None:
        super().__init__(
            material, what="a payload key", key_context=_KEY_CONTEXT, kid_context=_KID_CONTEXT
        )
        self._cipher = _aead(self._key)
        self.mark: str = self.key_id

    @classmethod
    def from_encrypted_session(cls, session: Any) -> PayloadKey:
        """The key for the journal of a wrapper over the SDK's ``EncryptedSession``: derived
        from the session's own (per-session) key, so nothing else needs configuring."""
        cipher = getattr(session, "cipher", None)
        signing = getattr(cipher, "_signing_key", None)
        encryption = getattr(cipher, "_encryption_key", None)
        if not (isinstance(signing, bytes) and isinstance(encryption, bytes)):
            raise ConfigurationError(
                f"cannot derive a journal key from {type(session).__qualname__}: its cipher is "
                "not the SDK's Fernet; pass ReconcileConfig(payload_key=...)"
            )
        material = blake3(signing + encryption, derive_key_context=_FROM_ENCRYPTED_SESSION)
        key = cls(material.digest())
        key.mark = SESSION_KEYS
        return key

    def seal(self, plaintext: bytes, associated: bytes) -> dict[str, str]:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._cipher.encrypt(nonce, plaintext, associated)
        return {
            "alg": ALGORITHM,
            "kid": self.key_id,
            "data": base64.b64encode(nonce + sealed).decode("ascii"),
        }

    def open(self, data: bytes, associated: bytes, *, what: str = "record") -> bytes:
        from cryptography.exceptions import InvalidTag

        try:
            return bytes(self._cipher.decrypt(data[:_NONCE_BYTES], data[_NONCE_BYTES:], associated))
        except InvalidTag:
            raise RecordTampered(
                f"{what}: the sealed payload does not open under key {self.key_id}: it was "
                "edited, or moved from another record"
            ) from None


def key_material(material: bytes | str, *, what: str) -> bytes:
    """Secret material given as bytes or as base64 text (standard or URL-safe alphabet)."""
    if isinstance(material, bytes | bytearray):
        return bytes(material)
    if isinstance(material, str):
        try:
            return base64.b64decode(material + "=" * (-len(material) % 4), altchars=b"-_")
        except (binascii.Error, ValueError):
            raise ConfigurationError(
                f"{what} given as text must be base64 (for example Fernet.generate_key())"
            ) from None
    raise ConfigurationError(f"{what} is bytes or base64 text, not {type(material).__name__}")


class Keyring:
    """The keys one wrapper (or one journal, for every wrapper using it) can open records
    with; the first added seals."""

    __slots__ = ("_keys", "current", "signer")

    def __init__(self, keys: Iterable[PayloadKey] = ()) -> None:
        self._keys: dict[str, PayloadKey] = {}
        self.current: PayloadKey | None = None
        self.signer: Signer | None = None
        """With a signer, every pending write record read with this keyring must carry a
        MAC it verifies (``signing``); records made under it are signed."""
        self.add(keys)

    def add_signer(self, signer: Signer) -> None:
        """Sign with ``signer`` (unless another signs already) and verify with its keys."""
        if self.signer is None:
            self.signer = signer.copy()
        else:
            self.signer.add(signer.keys())

    def add(self, keys: Iterable[PayloadKey]) -> None:
        for key in keys:
            self._keys.setdefault(key.key_id, key)
            if self.current is None:
                self.current = key

    def __iter__(self) -> Iterator[PayloadKey]:
        return iter(self._keys.values())

    def __bool__(self) -> bool:
        return bool(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"Keyring(key_ids={list(self._keys)!r}, signer={self.signer!r})"

    def open(self, sealed: Any, associated: bytes, *, what: str) -> tuple[bytes, PayloadKey]:
        """The plaintext of a sealed field, and the key that opened it."""
        if not (
            isinstance(sealed, Mapping)
            and isinstance(sealed.get("kid"), str)
            and isinstance(sealed.get("data"), str)
        ):
            raise RecordMalformed(f"{what}: the sealed payload is not a sealed field")
        if sealed.get("alg") != ALGORITHM:
            raise RecordMalformed(f"{what}: sealed with {sealed.get('alg')!r}, not {ALGORITHM}")
        key = self._keys.get(sealed["kid"])
        if key is None:
            raise PayloadKeyUnknown(
                f"{what}: the batch is sealed under key {sealed['kid']}, which this process does "
                "not hold (configure it in payload_key, or wrap the same EncryptedSession)",
                key_id=sealed["kid"],
            )
        try:
            data = base64.b64decode(sealed["data"], validate=True)
        except (binascii.Error, ValueError):
            raise RecordMalformed(f"{what}: the sealed payload is not base64") from None
        if len(data) <= _NONCE_BYTES:
            raise RecordMalformed(f"{what}: the sealed payload is truncated")
        return key.open(data, associated, what=what), key


def keyring_for(inner: Any, configured: Iterable[PayloadKey]) -> Keyring:
    """The keyring of a wrapper around ``inner``: the configured keys first, then one derived
    from each ``EncryptedSession`` in the wrapped chain."""
    from .identity import session_layers

    keys = list(configured)
    encrypted = getattr(sys.modules.get(_ENCRYPTED_SESSION_MODULE), "EncryptedSession", None)
    if encrypted is not None:
        for layer in session_layers(inner):
            if isinstance(layer, encrypted):
                keys.append(PayloadKey.from_encrypted_session(layer))
    return Keyring(keys)


def payload_keys(value: Any) -> tuple[PayloadKey, ...]:
    """``ReconcileConfig.payload_key`` as keys: one key (bytes, base64 text or a
    ``PayloadKey``) or a sequence of them, the first sealing."""
    return configured_keys(value, PayloadKey, "payload_key")


_Key = TypeVar("_Key")


def configured_keys(value: Any, kind: Callable[[Any], _Key], name: str) -> tuple[_Key, ...]:
    """A configured key setting as keys of ``kind``: None, one key (bytes, base64 text or a
    ``kind``) or a sequence of them, the first the one that is used to write."""
    if value is None:
        return ()
    if isinstance(value, bytes | bytearray | str) or not isinstance(value, Iterable):
        value = (value,)
    given = list(value)
    if not given:
        raise ConfigurationError(f"{name} is an empty list")
    keys: list[_Key] = []
    for key in given:
        if isinstance(key, kind):  # type: ignore[arg-type]
            keys.append(key)
        elif isinstance(key, bytes | bytearray | str):
            keys.append(kind(key))
        else:
            raise ConfigurationError(f"{name} is a key or a list of keys, not {type(key).__name__}")
    return tuple(keys)
