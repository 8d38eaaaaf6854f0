"""Deriving a ``BackendIdentity`` from a session: its store's type and which instance."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .records import BackendIdentity
from .session_protocol import HISTORY_METHODS

__all__ = ["derive_identity", "kind_of", "session_layers"]

# Wrappers whose identity is that of the store they wrap.
_UNDERLYING_ATTRIBUTES = ("underlying_session", "inner", "_inner", "session")


def derive_identity(session: Any) -> BackendIdentity:
    """Identity of the store under ``session`` (through wrapping sessions)."""
    store = session_layers(session)[-1]
    user = getattr(store, "backend_user", None)
    return BackendIdentity(
        kind=kind_of(type(store)),
        namespace=_namespace(store),
        user=user if isinstance(user, str) and user else None,
    )


def kind_of(cls: type[Any]) -> str:
    """The kind an identity records for a store of class ``cls``: its module and qualified
    name as the class says them (this package's stores say their public name,
    ``agents_reconcile.RevisionedRedisSession``). What the registry matches a recorded kind
    with, so the two never disagree."""
    return f"{cls.__module__}.{cls.__qualname__}"


def session_layers(session: Any) -> list[Any]:
    """``session`` and the sessions it wraps, outermost first, down to the store."""
    layers = [session]
    for _ in range(8):
        store = layers[-1]
        underlying = next(
            (
                getattr(store, name)
                for name in _UNDERLYING_ATTRIBUTES
                if hasattr(type(store), "add_items") and _is_session(getattr(store, name, None))
            ),
            None,
        )
        if underlying is None:
            break
        layers.append(underlying)
    return layers


def _is_session(value: Any) -> bool:
    return value is not None and all(
        callable(getattr(value, name, None)) for name in HISTORY_METHODS
    )


def _namespace(store: Any) -> str:
    declared = getattr(store, "backend_namespace", None)
    if isinstance(declared, str) and declared:
        # The store says which instance it is (without credentials): the revisioned stores do.
        return declared
    parts: list[str] = []
    db_path = getattr(store, "db_path", None)
    if db_path is not None:
        text = str(db_path)
        parts.append(text if text == ":memory:" else str(Path(text).expanduser().resolve()))
        if text == ":memory:":
            parts.append(f"object={id(store):x}")
    engine = getattr(store, "_engine", None)
    url = getattr(engine, "url", None)
    if url is not None:
        parts.append(_without_credentials(url))
    client_url = getattr(getattr(store, "_openai_client", None), "base_url", None)
    if isinstance(client_url, str) or type(client_url).__name__ == "URL":
        # A Conversations session: the service its client talks to.
        parts.append(_without_credentials(client_url))
    for attribute in ("sessions_table", "messages_table", "_sessions", "_messages", "_key_prefix"):
        value = getattr(store, attribute, None)
        name = getattr(value, "name", value)
        if isinstance(name, str):
            parts.append(f"{attribute.strip('_')}={name}")
    return ";".join(parts)


def _without_credentials(url: Any) -> str:
    render = getattr(url, "render_as_string", None)
    text = str(render(hide_password=True)) if callable(render) else str(url)
    parsed = urlsplit(text)
    host = parsed.hostname or ""
    if parsed.port:
        host = f"{host}:{parsed.port}"
    return urlunsplit((parsed.scheme, host, parsed.path, "", ""))
