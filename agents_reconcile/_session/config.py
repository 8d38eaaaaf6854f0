"""``ReconcileConfig``: the switches a user sets, and the ``AGENTS_RECONCILE`` flag."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final, Literal, get_args

from .._backends.addresses import printable, sqlite_file
from .._backends.journal import (
    IntentJournal,
    journal_gaps,
    meant_as_journal,
    require_journal,
)
from .._backends.redaction import Redacted
from .._backends.registry import parse_address
from .._core.records import BackendIdentity
from .._core.retention import DEFAULT_RETENTION, Retention, refuses_every_run
from .._core.sealing import PayloadKey, payload_keys
from .._core.signing import SigningKey, signing_keys
from ..errors import ConfigurationError, RecordMalformed

__all__ = ["ENV_FLAG", "ReconcileConfig", "env_disabled", "env_switch", "require_config"]

ENV_FLAG: Final = "AGENTS_RECONCILE"
_ON: Final = ("1", "true", "on", "yes")
_OFF: Final = ("0", "false", "off", "no")

# The choices of three options. ReconcileConfig's fields spell them out (its signature is what
# a reader of the API reference sees); these are what values are checked against.
OnUnchanged = Literal["replay", "fail"]
Durability = Literal["write_ahead"]
OnExtended = Literal["fail", "append"]


def env_switch(name: str, environ: Mapping[str, str] | None = None) -> bool | None:
    """The on/off variable ``name``: True for ``1/true/on/yes``, False for ``0/false/off/no``
    (any case, surrounding blanks ignored), None when it is unset or empty. Any other value
    is refused, never read as either."""
    text = (os.environ if environ is None else environ).get(name, "")
    word = text.strip().lower()
    if not word:
        return None
    if word in _ON:
        return True
    if word in _OFF:
        return False
    raise ConfigurationError(
        f"{name}={text!r} is neither on ({'/'.join(_ON)}) nor off ({'/'.join(_OFF)}); "
        "set one of these words, any case, or unset it"
    )


def env_disabled() -> bool:
    """Whether ``AGENTS_RECONCILE`` switches reconciliation off (``0/false/off/no``, any case).
    A value that is no on/off word raises ``ConfigurationError``."""
    return env_switch(ENV_FLAG) is False


def require_config(value: object) -> ReconcileConfig:
    """``value`` as the configuration of a wrapper: ``ReconcileConfig()`` for None, the value
    itself for a ``ReconcileConfig``; anything else is refused, naming what was given."""
    if value is None:
        return ReconcileConfig()
    if isinstance(value, ReconcileConfig):
        return value
    kind = type(value).__name__
    hint = (
        "; write ReconcileConfig(**{...}) to build one from a mapping"
        if isinstance(value, Mapping)
        else ""
    )
    raise ConfigurationError(f"config must be a ReconcileConfig or None, not {kind}{hint}")


@dataclass(frozen=True)
class ReconcileConfig:
    """How a ``ReconcilingSession`` records and settles uncertain writes.

    - ``enabled``: off makes the wrapper a pure pass-through and the gate a no-op;
      ``AGENTS_RECONCILE=0`` forces it off.
    - ``journal``: an ``IntentJournal``, an SQLite path, or a URL; default
      ``agents-reconcile.db`` in the working directory.
    - ``on_unchanged``: ``"replay"`` appends a missing batch once; ``"fail"`` denies with
      ``operator_required`` and leaves the intent pending.
    - ``durability``: ``"write_ahead"``, the only value: each intent is recorded before its
      append starts, so it survives SIGKILL (``"on_failure"`` was removed).
    - ``backend_identity``: overrides the identity derived from the inner session.
    - ``merge_retried_input``: treat a batch equal to the one just settled, sent while the
      history still ends with it, as the same write (the usual retry after a lost
      acknowledgement). Off, such a batch is appended again.
    - ``verify_tail``: re-read the ``len(batch) + 1`` newest items from the store before every
      append. By default a wrapper remembers them, and trusts that memory only while the
      journal's count of the session's writes is unchanged; set this when something writes to
      the session without going through a ``ReconcilingSession`` on the same journal.
    - ``lease_seconds``: how long an in-flight intent of a worker on another host is
      presumed live; ``in_flight_wait``: how long to wait for a live owner before denying.
    - ``journal_retries``: attempts when the journal cannot be read, before reporting it.
    - ``install``: a wrapper built with it installs the gate in the SDK's default runner
      (``agents_reconcile.install()``), so every run given a ``ReconcilingSession`` is gated
      with ``session=`` alone; ``AGENTS_RECONCILE_INSTALL=1`` does the same.
    - ``on_extended`` (revisioned stores): when a write is proven absent and other writers'
      writes are proven present after the revision it expected, ``"fail"`` denies (the run
      would go on from a history it has not seen); ``"append"`` appends it after them.
    - ``payload_key``: seal the items every record holds (journals, the RunState copy) with
      this key: at least 32 bytes of secret material, or base64 text, or a list of keys whose
      first seals and all open (rotation). Over the SDK's ``EncryptedSession`` a key derived
      from the session's own is used without it. Needs ``agents-reconcile[encrypt]``.
    - ``signing_key``: sign what a run carries in its context (the RunState copy of each failed
      intent, the seen write counts) with this key, and refuse a carried copy that is unsigned or
      does not verify (a RunState edited by whoever held it). At least 32 bytes of secret material,
      or base64 text, or a list of keys whose first signs and all verify (rotation). Without
      it, ``AGENTS_RECONCILE_SIGNING_KEY`` (base64 keys, comma-separated) is used when set.
    - ``retention``: how long the journal keeps settled decisions, receipts and idle sessions'
      write counts (``Retention``; 30 days each by default; None keeps everything for good).
      Wrappers prune the journal in the background as they append, a bounded batch at a time,
      and refuse a RunState older than the shortest of the three (``RunStateExpired``).
    """

    enabled: bool = True
    journal: IntentJournal | str | os.PathLike[str] | None = None
    on_unchanged: Literal["replay", "fail"] = "replay"
    durability: Literal["write_ahead"] = "write_ahead"
    backend_identity: BackendIdentity | str | None = None
    merge_retried_input: bool = True
    verify_tail: bool = False
    lease_seconds: float = 30.0
    in_flight_wait: float = 5.0
    journal_retries: int = 3
    on_extended: Literal["fail", "append"] = "fail"
    install: bool = False
    retention: Retention | None = DEFAULT_RETENTION
    payload_key: PayloadKey | bytes | str | Sequence[PayloadKey | bytes | str] | None = None
    signing_key: SigningKey | bytes | str | Sequence[SigningKey | bytes | str] | None = None

    def __post_init__(self) -> None:
        # Each field on its own, in the order they are declared; the first bad one is named.
        for name, check in _CHECKS.items():
            check(name, getattr(self, name))
        # Held as keys from here on: the secret material itself is never kept nor shown.
        object.__setattr__(
            self, "payload_key", _keys("payload_key", self.payload_key, payload_keys)
        )
        object.__setattr__(
            self, "signing_key", _keys("signing_key", self.signing_key, signing_keys)
        )

    def __repr__(self) -> str:
        # A journal URL may hold a password: shown as every address is, without it.
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if isinstance(self.journal, str):
            shown["journal"] = printable(self.journal)
        return f"ReconcileConfig({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    @property
    def payload_keys(self) -> tuple[PayloadKey, ...]:
        """The configured payload keys, the sealing one first."""
        return payload_keys(self.payload_key)

    @property
    def signing_keys(self) -> tuple[SigningKey, ...]:
        """The configured signing keys, the signing one first."""
        return signing_keys(self.signing_key)

    @property
    def active(self) -> bool:
        """``enabled``, unless the environment switches reconciliation off."""
        # The variable is read (and a bad value refused) whether or not ``enabled`` is set.
        switched_off = env_disabled()
        return self.enabled and not switched_off


# -- checks of single fields ---------------------------------------------------------------


def _shown(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def _flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, not {_shown(value)}")


def _choice(allowed: tuple[str, ...]) -> Callable[[str, object], None]:
    def check(name: str, value: object) -> None:
        if not isinstance(value, str) or value not in allowed:
            listed = ", ".join(repr(choice) for choice in allowed)
            raise ConfigurationError(f"{name} must be one of {listed}, not {_shown(value)}")

    return check


def _durability(name: str, value: object) -> None:
    if value == "on_failure":
        raise ConfigurationError(
            f"{name} {_shown(value)} was removed: every wrapper records its intent before the "
            "append (write-ahead), which measured faster on every store and survives SIGKILL; "
            "leave it out"
        )
    _choice(get_args(Durability))(name, value)


def _seconds(*, zero: bool) -> Callable[[str, object], None]:
    bound = "at least 0" if zero else "above 0"

    def check(name: str, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigurationError(
                f"{name} must be a number of seconds (int or float), not {_shown(value)}"
            )
        if (isinstance(value, float) and not math.isfinite(value)) or (
            value < 0 if zero else value <= 0
        ):
            raise ConfigurationError(
                f"{name} must be a finite number of seconds {bound}, not {value!r}"
            )

    return check


def _attempts(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an int, not {_shown(value)}")
    if value < 1:
        raise ConfigurationError(f"{name} must be at least 1, not {value!r}")


def _journal(name: str, value: object) -> None:
    if value is None or (isinstance(value, IntentJournal) and not journal_gaps(value)):
        return
    if isinstance(value, os.PathLike):
        path = os.fspath(value)
        if isinstance(path, str):
            _address(name, path, path, check=sqlite_file)
        return
    if meant_as_journal(value):
        require_journal(value)  # a journal written for an earlier release: says what to add
    if not isinstance(value, str):
        # Bytes may hold a URL with its password: only their type is named.
        shown = type(value).__name__ if isinstance(value, bytes | bytearray) else _shown(value)
        raise ConfigurationError(f"{name} must be an IntentJournal, a path or a URL, not {shown}")
    # Every part of the address is read as its backend's driver will read it, now: a scheme
    # no backend serves, a database that is no number, an sqlite URL whose path is in the
    # host part, ... are refused here, not at the first append (nor silently misread).
    _address(name, value, printable(value), check=lambda text: parse_address(text, what=name))


def _address(name: str, value: str, shown: str, *, check: Callable[[str], object]) -> None:
    try:
        check(value)
    except ConfigurationError as exc:
        problem = Redacted.of(value).scrub(str(exc))
        raise ConfigurationError(f"{name} {shown!r}: {problem}") from None


def _retention(name: str, value: object) -> None:
    if value is not None and not isinstance(value, Retention):
        raise ConfigurationError(
            f"{name} must be a Retention or None (keep everything), not {_shown(value)}"
        )
    zero = [] if value is None else refuses_every_run(value)
    if zero:
        raise ConfigurationError(
            f"{name} keeps {' and '.join(zero)} for no time at all: every RunState would be "
            "older than that at once, so every run carrying one would be refused; give a "
            "positive span, or None to keep that kind for good"
        )


def _identity(name: str, value: object) -> None:
    if value is None or isinstance(value, BackendIdentity):
        return
    if not isinstance(value, str):
        raise ConfigurationError(
            f"{name} must be a BackendIdentity, a 'kind|namespace' string or None, "
            f"not {_shown(value)}"
        )
    try:
        BackendIdentity.parse(value)
    except RecordMalformed:
        raise ConfigurationError(
            f"{name} must name a kind before any '|namespace', not {value!r}"
        ) from None


def _keys(name: str, value: object, parse: Callable[[Any], tuple[Any, ...]]) -> Any:
    # The material is secret: a refusal names the field, never the value.
    try:
        return parse(value) or None
    except ConfigurationError as exc:
        if str(exc).startswith(name):
            raise
        raise ConfigurationError(f"{name}: {exc}") from None


_CHECKS: Final[dict[str, Callable[[str, object], None]]] = {
    "enabled": _flag,
    "journal": _journal,
    "on_unchanged": _choice(get_args(OnUnchanged)),
    "durability": lambda name, value: _durability(name, value),
    "backend_identity": _identity,
    "merge_retried_input": _flag,
    "verify_tail": _flag,
    "lease_seconds": _seconds(zero=False),
    "in_flight_wait": _seconds(zero=True),
    "journal_retries": _attempts,
    "on_extended": _choice(get_args(OnExtended)),
    "install": _flag,
    "retention": _retention,
}
