"""``ReconcileConfig``: the switches a user sets, and the ``AGENTS_RECONCILE`` flag."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final, Literal

from .backends.redaction import redacted
from .backends.registry import backend_for
from .errors import ConfigurationError
from .journal import IntentJournal
from .records import BackendIdentity
from .sealing import PayloadKey, payload_keys
from .signing import SigningKey, signing_keys

__all__ = ["ENV_FLAG", "ReconcileConfig", "env_disabled"]

ENV_FLAG: Final = "AGENTS_RECONCILE"
_OFF: Final = frozenset({"0", "false", "off", "no"})


def env_disabled() -> bool:
    """Whether ``AGENTS_RECONCILE`` switches reconciliation off (``0/false/off/no``, any case)."""
    return os.environ.get(ENV_FLAG, "").strip().lower() in _OFF


@dataclass(frozen=True)
class ReconcileConfig:
    """How a ``ReconcilingSession`` records and settles uncertain writes.

    - ``enabled``: off makes the wrapper a pure pass-through and the gate a no-op;
      ``AGENTS_RECONCILE=0`` forces it off.
    - ``journal``: an ``IntentJournal``, an SQLite path, or a URL; default
      ``agents-reconcile.db`` in the working directory.
    - ``durability``: ``"write_ahead"`` records each intent before the append starts (it
      survives SIGKILL); ``"on_failure"`` records it only when the append raises or is cancelled.
    - ``on_unchanged``: ``"replay"`` appends a missing batch once; ``"fail"`` denies with
      ``operator_required`` and leaves the intent pending.
    - ``backend_identity``: overrides the identity derived from the inner session.
    - ``merge_retried_input``: treat a batch equal to the one just settled, sent while the
      history still ends with it, as the same write (the usual retry after a lost
      acknowledgement). Off, such a batch is appended again.
    - ``verify_tail``: re-read the ``len(batch) + 1`` newest items from the store before every
      append. By default a write-ahead wrapper remembers them, and trusts that memory only while
      the journal's count of the session's writes is unchanged; set this when something writes
      to the session without going through a write-ahead ``ReconcilingSession`` on the same
      journal (``on_failure`` wrappers always re-read).
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
      intent, the seen marks) with this key, and refuse a carried copy that is unsigned or does
      not verify (a RunState edited by whoever held it). At least 32 bytes of secret material,
      or base64 text, or a list of keys whose first signs and all verify (rotation). Without
      it, ``AGENTS_RECONCILE_SIGNING_KEY`` (base64 keys, comma-separated) is used when set.
    """

    enabled: bool = True
    journal: IntentJournal | str | os.PathLike[str] | None = None
    durability: Literal["write_ahead", "on_failure"] = "write_ahead"
    on_unchanged: Literal["replay", "fail"] = "replay"
    backend_identity: BackendIdentity | str | None = None
    merge_retried_input: bool = True
    verify_tail: bool = False
    lease_seconds: float = 30.0
    in_flight_wait: float = 5.0
    journal_retries: int = 3
    on_extended: Literal["fail", "append"] = "fail"
    install: bool = False
    payload_key: PayloadKey | bytes | str | Sequence[PayloadKey | bytes | str] | None = None
    signing_key: SigningKey | bytes | str | Sequence[SigningKey | bytes | str] | None = None

    def __post_init__(self) -> None:
        # Held as keys from here on: the secret material itself is never kept nor shown.
        object.__setattr__(self, "payload_key", payload_keys(self.payload_key) or None)
        object.__setattr__(self, "signing_key", signing_keys(self.signing_key) or None)
        if self.on_extended not in ("fail", "append"):
            raise ConfigurationError(
                f"on_extended must be 'fail' or 'append', not {self.on_extended!r}"
            )
        if self.durability not in ("write_ahead", "on_failure"):
            raise ConfigurationError(
                f"durability must be 'write_ahead' or 'on_failure', not {self.durability!r}"
            )
        if self.on_unchanged not in ("replay", "fail"):
            raise ConfigurationError(
                f"on_unchanged must be 'replay' or 'fail', not {self.on_unchanged!r}"
            )
        if self.lease_seconds <= 0 or self.in_flight_wait < 0 or self.journal_retries < 1:
            raise ConfigurationError(
                "lease_seconds must be positive, in_flight_wait non-negative, "
                "journal_retries at least 1"
            )
        if self.journal is not None and not isinstance(
            self.journal, str | Path | os.PathLike | IntentJournal
        ):
            raise ConfigurationError(
                f"journal must be an IntentJournal, a path or a URL, not {self.journal!r}"
            )
        if isinstance(self.journal, str):
            # A scheme no registered backend serves is refused now, not at the first append.
            backend_for(self.journal, what="journal")

    def __repr__(self) -> str:
        # A journal URL may hold a password: shown as every address is, without it.
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if isinstance(self.journal, str):
            shown["journal"] = redacted(self.journal)
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
        return self.enabled and not env_disabled()
