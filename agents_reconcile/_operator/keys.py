"""The deployment's payload keys for an operator's command, from where secrets may come: a
key file (``--payload-key-file PATH``) or an environment variable (``--payload-key-env NAME``,
or ``AGENTS_RECONCILE_PAYLOAD_KEY`` when set), never a value on the command line, where other
users of the host and the shell's history would see it.

Either holds the keys the deployment gives ``ReconcileConfig(payload_key=...)``, as base64
text: one key, or several (the sealing one first) separated by commas or new lines; in a file,
blank lines and lines starting with ``#`` are skipped. With them a command opens sealed
records, and what it writes (a repaired history, an effect's receipt) is sealed as the
deployment's own records are. The signing keys come from ``AGENTS_RECONCILE_SIGNING_KEY``, as
for the library."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

from .._core.sealing import Keyring, PayloadKey
from .._core.signing import signer_for
from ..errors import ConfigurationError

__all__ = ["PAYLOAD_KEY_ENV", "keyring", "payload_keys"]

PAYLOAD_KEY_ENV: Final = "AGENTS_RECONCILE_PAYLOAD_KEY"
"""Where the commands look for the payload keys when no option names a place."""


def payload_keys(args: Any) -> tuple[PayloadKey, ...]:
    """The payload keys the command's options point to (none when nothing points to any).
    A file or variable that is named but missing, empty or not keys is refused: a command
    asked to seal never writes unsealed."""
    path: str | None = getattr(args, "payload_key_file", None)
    name: str | None = getattr(args, "payload_key_env", None)
    if path is not None:
        where = f"--payload-key-file {path}"
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else "unreadable"
            raise ConfigurationError(f"{where}: {problem}") from None
    else:
        where = f"--payload-key-env {name}" if name is not None else PAYLOAD_KEY_ENV
        found = os.environ.get(name or PAYLOAD_KEY_ENV)
        if found is None:
            if name is None:
                return ()
            raise ConfigurationError(f"{where}: the variable is not set")
        text = found
    parts = [
        part.strip()
        for line in text.splitlines()
        if not line.lstrip().startswith("#")
        for part in line.split(",")
        if part.strip()
    ]
    if not parts:
        raise ConfigurationError(f"{where} holds no key")
    try:
        return tuple(PayloadKey(part) for part in parts)
    except ConfigurationError as exc:
        # The key's own text is never repeated: only where it came from and what is wrong.
        raise ConfigurationError(f"{where}: {exc}") from None


def keyring(args: Any) -> Keyring:
    """The keys a command opens (and seals and signs) records with: the payload keys of its
    options, and the signing keys of ``AGENTS_RECONCILE_SIGNING_KEY``."""
    found = Keyring(payload_keys(args))
    signer = signer_for(())
    if signer is not None:
        found.add_signer(signer)
    return found
