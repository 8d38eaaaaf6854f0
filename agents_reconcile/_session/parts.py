"""What one ``ReconcilingSession`` is made of, made once when it is built (``make_parts``).

The inner session is checked first (what cannot be wrapped honestly is refused, with why), then
its identity is settled (configured, or derived from the store), its records' keys chosen
(sealed over an encrypting store or with ``payload_key``, signed with a signing key), and one
``SessionState`` made that the settler, the writer chosen for the store (by fingerprints, or by
compare-and-swap on a revisioned store), the resolver and the gate all share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents.memory import OpenAIConversationsSession

from .._core.identity import derive_identity, session_layers
from .._core.records import SESSION_WIDE, BackendIdentity, Outcome, Reason
from .._core.revision import is_revisioned
from .._core.sealing import keyring_for
from .._core.session_protocol import HISTORY_METHODS
from .._core.signing import signer_for
from ..errors import UnsupportedSession
from . import default_runner, runstate
from .admission import Gatekeeper
from .claims import PROCESS_IN_FLIGHT, InFlight
from .conversation_calls import ConversationCalls
from .inner import InnerSession
from .journal_client import JournalClient
from .journal_place import refuse_journal_in_store
from .resolver import Resolver
from .revision_writer import RevisionWriter
from .settler import Settler
from .state import SessionLock, SessionState
from .writer import FingerprintWriter, Writer

if TYPE_CHECKING:
    from .config import ReconcileConfig

__all__ = ["Parts", "make_parts"]


@dataclass(frozen=True)
class Parts:
    """One wrapper's parts; ``state`` is what they share."""

    identity: BackendIdentity
    calls: InnerSession
    client: JournalClient
    state: SessionState
    settler: Settler
    writer: Writer
    resolver: Resolver
    admission: Gatekeeper


def make_parts(
    session: Any,
    inner: Any,
    config: ReconcileConfig,
    in_flight: InFlight | None,
    session_id: str | None = None,
) -> Parts:
    """The parts of ``session``, the wrapper of ``inner`` under ``config``, for the session
    ``session_id`` (default: the inner session's own)."""
    check_inner(inner, has_id=session_id is not None)
    session_id = session_id if session_id is not None else inner.session_id
    if config.active:
        # The journal in the chat store's own file would add its tables to the application's
        # chat database: refused, before anything is opened.
        refuse_journal_in_store(config.journal, inner)
    identity = config.backend_identity
    if isinstance(identity, str):
        identity = BackendIdentity.parse(identity)
    identity = identity or derive_identity(inner)
    # Read even when it would not be used, so a bad value is refused wherever it is set.
    install_asked = default_runner.env_install()
    if config.active and (config.install or install_asked):
        default_runner.install()
    # Over an encrypting store (or with payload_key) every record's batch is sealed; with a
    # signing key, records (in the journal and in what runs carry) are signed, and checked
    # when they come back.
    keyring = keyring_for(inner, config.payload_keys)
    signer = signer_for(config.signing_keys) if config.active else None
    if signer is not None:
        keyring.add_signer(signer)
    client = JournalClient(session_id, identity, config, keyring)

    async def busy(waited: float) -> None:
        await client.deny(
            None,
            Outcome.AMBIGUOUS,
            Reason.SESSION_BUSY,
            {"waited_seconds": waited},
            intent_id=SESSION_WIDE,
        )

    conversation = isinstance(inner, OpenAIConversationsSession)
    calls = ConversationCalls(inner) if conversation else InnerSession(inner)
    # A revisioned store is judged by its record of writes, not by fingerprints.
    store = inner if is_revisioned(inner) else None
    state = SessionState(
        client=client,
        config=config,
        inner=calls,
        store=store,
        carried=runstate.CarriedState(client, signer),
        lock=SessionLock((session_id, str(identity)), wait=config.in_flight_wait, on_timeout=busy),
        in_flight=in_flight if in_flight is not None else PROCESS_IN_FLIGHT,
        # The SDK ignores ids when it matches a Conversations session's items, and its items
        # come back rewritten: digested as the service's view of them (conversation_items).
        ignore_ids=conversation or bool(getattr(inner, "_ignore_ids_for_matching", False)),
        scheme=calls.scheme,
    )
    settler = Settler(state)
    writer: Writer = (
        FingerprintWriter(state, settler) if store is None else RevisionWriter(state, settler)
    )
    return Parts(
        identity=identity,
        calls=calls,
        client=client,
        state=state,
        settler=settler,
        writer=writer,
        resolver=Resolver(client, settler, lock=state.lock),
        admission=Gatekeeper(state, settler, session),
    )


def check_inner(inner: Any, *, has_id: bool = False) -> None:
    """Refuse what cannot be wrapped honestly, with why (``has_id``: its id is known
    otherwise than from its ``session_id``)."""
    layers = session_layers(inner)
    if any(isinstance(layer, OpenAIConversationsSession) for layer in layers[1:]):
        raise UnsupportedSession(
            f"{type(inner).__name__} wraps an OpenAIConversationsSession: the SDK special-cases "
            "that session by its type, which a session around it hides, and its writes go in "
            "requests this wrapper cannot see. Wrap the OpenAIConversationsSession itself"
        )
    missing = [name for name in HISTORY_METHODS if not callable(getattr(inner, name, None))]
    if missing or not (has_id or isinstance(getattr(inner, "session_id", None), str)):
        raise UnsupportedSession(
            f"{type(inner).__name__} is not an Agents SDK Session "
            f"(missing: {', '.join(missing) or 'session_id'})"
        )
