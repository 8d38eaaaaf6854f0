"""An external effect's record: its key, its intent (who started it, when), and, once the tool
returned, its receipt (the output, sealed like journal batches where payloads are sealed, and
the output's digest). Digest-guarded and, where the deployment signs, signed, like pending
writes; the key is derived from the session, the tool call, the tool and its canonical
arguments with the fingerprints' canonical bytes and hash."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

import orjson

from ..errors import FingerprintError, RecordMalformed, RecordTampered
from .fingerprint import exact_json, item_digest
from .records import RECORD_VERSION, _body_digest, _checked_body, _str

if TYPE_CHECKING:
    from .sealing import Keyring, PayloadKey
    from .signing import SigningKey

__all__ = [
    "Effect",
    "EffectState",
    "arguments_digest",
    "business_effect_key",
    "effect_key",
    "shown_output",
]

_SIGNED: Final = "agents-reconcile effect"


def _arguments(arguments_json: str) -> Any:
    # The model's text as the SDK parses it; text that is not JSON stays text.
    try:
        return json.loads(arguments_json) if arguments_json else {}
    except ValueError:
        return arguments_json


def arguments_digest(arguments_json: str) -> str:
    """The digest of a call's arguments, as canonical JSON (key order and spacing aside)."""
    return item_digest({"arguments": _arguments(arguments_json)})


def effect_key(session_id: str, call_id: str, tool: str, arguments_json: str) -> str:
    """The idempotency key of one tool call's external effect: the same session, call, tool
    and arguments always give the same key (64 hex), anything else another."""
    return item_digest(
        {
            "effect": {
                "session_id": session_id,
                "call_id": call_id,
                "tool": tool,
                "arguments": _arguments(arguments_json),
            }
        }
    )


def business_effect_key(tool: str, key: str) -> str:
    """The idempotency key of the external effect a tool's own key names (``effect_tool(key=
    ...)``, an order id, say): the same tool and key always give the same key (64 hex),
    whatever the session, the call id or the other arguments; another tool or key, another."""
    return item_digest({"effect": {"tool": tool, "key": key}})


class EffectState(enum.Enum):
    """Where an effect stands."""

    STARTED = "started"
    """Its intent is durable and the body was (or is being) run; no receipt yet."""
    DONE = "done"
    """The body returned and its receipt is durable: never run it again."""


@dataclass(frozen=True)
class Effect:
    """One tool call's effect, as the journal keeps it."""

    key: str
    session_id: str
    tool: str
    call_id: str
    arguments_digest: str
    owner: str
    started_at: float
    state: EffectState = EffectState.STARTED
    output: Any = field(default=None, repr=False)
    """What the model was shown of the tool's output, held once the receipt is written."""
    output_digest: str | None = None
    finished_at: float | None = None
    attempts: int = 1
    """How many times the body was started under this key (a re-run by ``check`` or an
    idempotent tool counts)."""
    error_digests: tuple[str, ...] = ()
    """The digests of the error outputs the model was shown when a body under this key
    raised (a failure receipt: it vouches for those outputs; the outcome stays unknown)."""
    seal_key: PayloadKey | None = field(default=None, compare=False, repr=False)
    sign_key: SigningKey | None = field(default=None, compare=False, repr=False)
    age: float | None = field(default=None, compare=False)
    """Seconds since the journal last stamped this record (begun, taken over, released or
    finished) by the journal's own clock, read in the same step as the record (the server's
    time on Redis and PostgreSQL): a lease is judged on it, never on a writer's clock. None
    when the journal cannot say (a record not read from a journal, or a journal that keeps
    no such time): then ``started_at`` and the reader's clock stand for it. Never encoded."""

    def held_for(self, now: float) -> float:
        """Seconds since this record was begun or last taken over: its age by the journal's
        clock where the journal told it, else by the reader's (``now``, less ``started_at``,
        which the writer stamped with its own clock)."""
        return self.age if self.age is not None else now - self.started_at

    def with_receipt(self, output: Any, *, at: float) -> Effect:
        """This effect, done, with ``output`` as its receipt."""
        plain = shown_output(output)
        return replace(
            self,
            state=EffectState.DONE,
            output=plain,
            output_digest=item_digest({"output": plain}),
            finished_at=at,
            age=None,
        )

    def encode(self) -> bytes:
        body: dict[str, Any] = {
            "v": RECORD_VERSION,
            "type": "effect",
            "key": self.key,
            "session_id": self.session_id,
            "tool": self.tool,
            "call_id": self.call_id,
            "arguments_digest": self.arguments_digest,
            "owner": self.owner,
            "started_at": self.started_at,
            "state": self.state.value,
            "output_digest": self.output_digest,
            "finished_at": self.finished_at,
            "attempts": self.attempts,
        }
        if self.error_digests:  # present only when needed: older records keep their digest
            body["error_digests"] = list(self.error_digests)
        body["digest"] = _body_digest(body)
        if self.state is EffectState.DONE:
            if self.seal_key is not None:
                hidden, _, _ = exact_json({"output": self.output})
                body["sealed"] = self.seal_key.seal(hidden, body["digest"].encode())
            else:
                body["output"] = self.output
        if self.sign_key is not None:
            body["mac"] = self.sign_key.signature(_SIGNED, body["digest"].encode())
        # A receipt holding a lone surrogate (a tool printing undecodable bytes) is written as
        # the batches write such an item: the stdlib's ASCII JSON text, escapes and all.
        data, _, _ = exact_json(body)
        return data

    @classmethod
    def decode(cls, data: bytes | str, keyring: Keyring | None = None) -> Effect:
        """Rebuild a record, refusing damaged, edited, unsigned (where records are signed) or
        future-version input; a sealed output opens only with a key of ``keyring``."""
        try:
            raw = _loads(data)
        except ValueError as exc:
            raise RecordMalformed(f"effect record is not valid JSON: {exc}") from exc
        if not isinstance(raw, dict):
            raise RecordMalformed(f"effect record is {type(raw).__name__}, not an object")
        # A sealed output is covered by the output digest, like a readable one.
        _checked_body({k: v for k, v in raw.items() if k != "sealed"}, "effect")
        body: dict[str, Any] = raw
        what = f"effect {str(body.get('key'))[:64]!r}"
        signer = keyring.signer if keyring is not None else None
        if signer is not None:
            signer.verify(_SIGNED, str(body.get("digest")).encode(), body.get("mac"), what=what)
        try:
            state = EffectState(body["state"])
            effect = cls(
                key=_str(body, "key"),
                session_id=_str(body, "session_id"),
                tool=_str(body, "tool"),
                call_id=_str(body, "call_id"),
                arguments_digest=_str(body, "arguments_digest"),
                owner=_str(body, "owner"),
                started_at=float(body["started_at"]),
                state=state,
                output_digest=body["output_digest"],
                finished_at=None if body["finished_at"] is None else float(body["finished_at"]),
                attempts=int(body["attempts"]),
                error_digests=_digests(body.get("error_digests", [])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordMalformed(f"{what}: missing or mistyped {exc}") from exc
        if state is not EffectState.DONE:
            return effect
        output, key = _output(body, keyring, what)
        if item_digest({"output": output}) != effect.output_digest:
            raise RecordTampered(f"{what}: the output does not match its digest")
        return replace(effect, output=output, seal_key=key)


def _output(
    body: dict[str, Any], keyring: Keyring | None, what: str
) -> tuple[Any, PayloadKey | None]:
    if "sealed" not in body:
        if "output" not in body:
            raise RecordMalformed(f"{what}: a receipt without its output")
        return body["output"], None
    if keyring is None or not keyring:
        from ..errors import PayloadKeyUnknown

        sealed = body["sealed"]
        kid = sealed.get("kid") if isinstance(sealed, dict) else None
        raise PayloadKeyUnknown(f"{what}: the output is sealed (key {kid})", key_id=str(kid))
    plaintext, key = keyring.open(body["sealed"], str(body["digest"]).encode(), what=what)
    try:
        return _loads(plaintext)["output"], key
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordTampered(f"{what}: the sealed output is not an output") from exc


def _loads(data: bytes | str) -> Any:
    """JSON as ``exact_json`` writes it: orjson's, or (holding an escaped lone surrogate,
    which orjson does not read) the stdlib's."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            return json.loads(data)
        except RecursionError:
            raise ValueError("nested too deep") from None


def _digests(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(d, str) for d in value):
        raise TypeError("'error_digests'")
    return tuple(value)


def shown_output(output: Any) -> Any:
    """The output as the receipt keeps it: what the model was shown. A text stays as it is;
    anything else is what the SDK turns a tool's return value into for the model (its text,
    or its structured parts), so a receipt returned later shows the model the same thing."""
    if isinstance(output, str):
        return output
    try:  # The SDK's own conversion (a private helper: optional).
        from agents.items import ItemHelpers

        shown: Any = ItemHelpers._convert_tool_output(output)
    except (ImportError, AttributeError):  # pragma: no cover - an SDK without it
        shown = str(output)
    try:
        data, _, _ = exact_json(shown)
    except FingerprintError:
        return str(shown)
    return _loads(data)
