"""Addresses fit for messages: every URL a journal, a store or the CLI prints goes through here.

A password may sit in a URL's user information or in its query (``?password=``), and a driver
may repeat either in its own error text; ``Redacted`` keeps the address without them and
scrubs them from any text, so no message, repr or printed line carries a credential.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "Redacted", "redacted"]

MASK: Final = "***"
# Query parameters that carry a secret rather than say where the server is.
_SECRET_PARAMETERS: Final = frozenset({"password", "passwd", "pwd", "sslpassword", "token"})


@dataclass(frozen=True, slots=True)
class Redacted:
    """An address without its credentials (``shown``) and the secrets it held."""

    shown: str
    secrets: tuple[str, ...] = ()

    @classmethod
    def of(cls, address: str, extra_secrets: Iterable[str] = ()) -> Redacted:
        """``address`` redacted; ``extra_secrets`` (a password passed apart from the URL) are
        scrubbed from messages too."""
        shown, secrets = _split(address)
        found = {*secrets, *(s for s in extra_secrets if s)}
        # Longest first, so that a secret holding another is scrubbed whole.
        return cls(shown, tuple(sorted(found, key=len, reverse=True)))

    def scrub(self, text: str) -> str:
        """``text`` with every secret of the address replaced by ``***``."""
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text

    def __str__(self) -> str:
        return self.shown


def redacted(address: str) -> str:
    """``address`` as it may be printed: a path as it is, a URL without its password."""
    return Redacted.of(address).shown


def _split(address: str) -> tuple[str, list[str]]:
    if "://" not in address:
        return address, []
    try:
        parts = urlsplit(address)
        userinfo, at, hosts = parts.netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        secrets = [password, unquote(password)] if password else []
        query: list[tuple[str, str]] = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key.lower() in _SECRET_PARAMETERS:
                secrets.append(value)
                value = MASK
            query.append((key, value))
        netloc = f"{user}@{hosts}" if at and user else hosts
        shown = urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="*"), ""))
    except ValueError:
        # Not parsable, so not knowably free of a password: name only its scheme.
        return f"<unparsable {address.split('://', 1)[0][:16]} address>", []
    return shown, [secret for secret in secrets if secret]
