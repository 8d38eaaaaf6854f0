"""``ReconcilingSession``: the SDK-facing surface. It orders calls; it decides nothing itself.

One way through. An append: ``add_items`` -> the writer settles what is pending, opens the
intent, runs the inner append, and clears the intent once acknowledged (``writer``,
``revision_writer``). On the next use: pending intent -> claim -> judge -> policy -> settle,
replay or refuse (``settler``, ``judges``, ``policy``). The gate (``gate``) asks the same before
every model call, through ``admission``.
"""

from __future__ import annotations

import warnings
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, Final

from agents.memory import OpenAIConversationsSession

from .._core.records import BackendIdentity, Decision, PendingWrite
from .._core.run_context import context_of
from ..errors import ConfigurationError
from . import default_runner, runstate
from .capabilities import FORWARDED, Guard, forwarded
from .claims import registry_for_new_wrapper
from .config import ReconcileConfig, require_config
from .conversations import for_conversations
from .parts import make_parts

if TYPE_CHECKING:
    from agents import RunConfig, RunHooks
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings
    from agents.run_context import RunContextWrapper

    from .._backends.journal import IntentJournal
    from .._core.policy import Resolution
    from .admission import Gating
    from .journal_client import JournalClient
    from .resolver import Resolver
    from .runstate import CarriedState

__all__ = ["CONTEXT_KEY", "ReconcilingSession"]

CONTEXT_KEY: Final = runstate.CONTEXT_KEY


class ReconcilingSession:
    """Wraps any Agents SDK session so that no uncertain append is duplicated, lost, or
    continued on a history nobody can vouch for.

    Pass it as ``session=`` after ``agents_reconcile.install()`` (or with
    ``run_config=session.run_config()`` and ``hooks=session.hooks()`` on each run): the gate
    then checks pending intents before every model call, streamed or not, fresh or resumed.
    """

    __agents_reconcile_gated__ = True  # the installed runner gates the runs given this session

    def __new__(cls, inner: Any = None, *args: Any, **kwargs: Any) -> ReconcilingSession:
        if isinstance(inner, OpenAIConversationsSession) and not issubclass(
            cls, OpenAIConversationsSession
        ):
            # The SDK treats this session by its type: the wrapper (or a subclass of it) is
            # one too.
            cls = for_conversations(cls)
        return super().__new__(cls)

    def __init__(self, inner: Any, *, config: ReconcileConfig | None = None) -> None:
        if isinstance(inner, ReconcilingSession):
            raise ConfigurationError("this session is already a ReconcilingSession")
        self.config = require_config(config)
        self._inner = inner
        # This process's registry of intents in flight (another one under claims.held_apart).
        self._in_flight = registry_for_new_wrapper()
        self._active = self.config.active
        # Whether the gate reached this session's runs some way (run_config(), hooks() or the
        # installed runner); a run without it is warned about once.
        self._gate_seen = False
        # History limits through which a fresh run reads the history it builds on (those of
        # RunConfigs passed to run_config(), besides the session's own). The SDK's other
        # reads (a resumed run's checks) use other limits.
        self._history_limits: set[int] = set()
        if self._binds_now():
            self._bind()

    def _binds_now(self) -> bool:
        """Whether the parts are made at once (a session whose store must be created first
        makes them on first use)."""
        return True

    def _bind(self, session_id: str | None = None) -> None:
        """Make this wrapper's parts for ``session_id`` (default: the inner session's id as it
        is now)."""
        parts = make_parts(self, self._inner, self.config, self._in_flight, session_id)
        self.session_id: str = parts.client.session_id
        self.backend_identity: BackendIdentity = parts.identity
        self._calls, self._client, self._carried = parts.calls, parts.client, parts.state.carried
        self._tail, self._held, self._lock = parts.state.tail, parts.state.held, parts.state.lock
        self._settler, self._writer = parts.settler, parts.writer
        self._resolver, self._admission = parts.resolver, parts.admission

    def __repr__(self) -> str:
        return f"ReconcilingSession({self._inner!r}, backend={self.backend_identity})"

    # -- what the SDK sees ---------------------------------------------------------------

    @property
    def inner(self) -> Any:
        """The wrapped session (writes made through it directly are not reconciled)."""
        return self._inner

    @property
    def session_settings(self) -> SessionSettings | None:
        return getattr(self._inner, "session_settings", None)

    @session_settings.setter
    def session_settings(self, value: SessionSettings | None) -> None:
        self._inner.session_settings = value

    @property
    def enabled(self) -> bool:
        """Whether this wrapper records and reconciles (config flag and environment)."""
        return self._active

    @property
    def journal(self) -> IntentJournal:
        """The intent journal, opened on first use."""
        return self._client.journal

    @property
    def journal_client(self) -> JournalClient:
        """This session's way to its journal: its keys, its trail, its denials."""
        return self._client

    @property
    def carried(self) -> CarriedState:
        """What runs carry for this session in their context (RunState copies of its failed
        intents, its seen write count and when it was seen), and the checks made of it."""
        return self._carried

    @property
    def resolver(self) -> Resolver:
        """What ``resolve()`` uses; its ``preview()`` judges an intent without settling it."""
        return self._resolver

    def __getattr__(self, name: str) -> Any:
        # Only the SDK's capability hooks, and only those the inner session really has:
        # the SDK decides what a session can do by looking for them.
        if name in FORWARDED:
            target = getattr(self.__dict__.get("_inner"), name, None)
            if target is not None:
                guard = Guard(
                    enabled=self._active,
                    settle=lambda: self._settler.settle_pending(None),
                    forget_tail=self._tail.forget,
                )
                return forwarded(name, target, guard)
        raise AttributeError(f"{type(self).__name__!s} object has no attribute {name!r}")

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The inner history, after settling pending intents (raises ``ContinuationDenied``)."""
        if wrapper is not None and not self._gate_seen:
            self._notice_ungated()
        context = context_of(wrapper)
        if self._active:
            await self._settler.settle_before_read(context, wrapper)
        own_writes = self._calls.own_writes
        write_count = await self._writer.write_count() if self._active else None
        # A run that reads the history as a fresh run does has seen every write so far.
        marks = context is not None and self._marks_reads(limit)
        if marks and write_count is None and self._carried.has_seen(context):
            write_count = await self._client.write_count()
        if self._active and self._reads_whole(limit):
            await self._writer.refresh_head()
        items = await self._calls.read(limit, wrapper)
        if write_count is not None and self._calls.own_writes == own_writes:
            # Only a read that no write of ours overtook may refresh the remembered tail.
            if self._writer.trusts_memory:
                self._tail.observe_items(
                    items,
                    limit,
                    write_count,
                    ignore_ids=self._writer.ignore_ids,
                    scheme=self._writer.scheme,
                )
            if marks:
                self._carried.record_seen(context, write_count)
        return items

    async def history(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history as the wrapped store holds it now (the newest ``limit`` items, oldest
        first), for showing a person what a session holds, a denied one included: nothing
        pending is settled, replayed or released, nothing is refused, and nothing a later run
        relies on (its remembered tail, its seen write count) is changed. The items of a
        write whose outcome is unknown may or may not be among them: that is what the
        decision is about. Not for building a model's input: a run reads through
        ``get_items``, which settles first."""
        return list(await self._calls.read(limit, None))

    def _marks_reads(self, limit: int | None) -> bool:
        """Whether a read with this limit is a fresh run's read of the history (all of it, or
        the session's own limit); the SDK reads a resumed run's tail with other limits."""
        if not self._active:
            return False
        return self._reads_whole(limit)

    def _reads_whole(self, limit: int | None) -> bool:
        """Whether a read with this limit is how a fresh run reads the history it builds on:
        all of it, the session's own limit, or a limit of a RunConfig given to run_config()."""
        if limit is None or limit in self._history_limits:
            return True
        settings = self.session_settings
        return settings is not None and settings.limit == limit

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Append ``items`` under a recorded intent; a failure keeps the intent pending and
        re-raises the backend's own exception with a note naming it."""
        if not self._active:
            await self._calls.append(items, wrapper)
            return
        if wrapper is not None and not self._gate_seen:
            self._notice_ungated()
        await self._writer.add(items, context_of(wrapper), wrapper)

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Remove the newest item, after settling pending intents."""
        popped: TResponseInputItem | None
        if not self._active:
            popped = await self._calls.call("pop_item", wrapper)
            return popped
        context = context_of(wrapper)
        async with self._lock.held():
            await self._settler.settle_pending(context, wrapper, locked=True)
            popped = await self._writer.remove(
                context,
                lambda: self._calls.call("pop_item", wrapper),
                wrote=lambda item: item is not None,
            )
            return popped

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Clear the history, after settling pending intents."""
        if not self._active:
            await self._calls.call("clear_session", wrapper)
            return
        context = context_of(wrapper)
        async with self._lock.held():
            await self._settler.settle_pending(context, wrapper, locked=True)
            await self._writer.remove(
                context,
                lambda: self._calls.call("clear_session", wrapper),
                wrote=lambda _: True,
            )

    # -- public controls ------------------------------------------------------------------

    async def pending(self) -> list[PendingWrite]:
        """Unresolved intents the journal holds for this session and backend (no reconciling).
        This wrapper's acknowledged appends are cleared first: they are not pending."""
        journal = self._client.for_reading(active=self._active)
        if journal is not None:
            await self._writer.flush_clearing()
        entries = (
            [] if journal is None else await journal.pending(self.session_id, self.backend_identity)
        )
        found = [entry.intent for entry in entries]
        known = {intent.intent_id for intent in found}
        found.extend(i for i in self._held.unjournaled.values() if i.intent_id not in known)
        return found

    async def reconcile(self, context: Any = None) -> list[Decision]:
        """Classify and settle pending intents now (what the gate does before a model call).

        Pass the run's mapping ``context`` to include the intents a RunState carries.
        Raises ``ContinuationDenied`` when one cannot be vouched for.
        """
        if not self._active:
            return []
        mapping = context if isinstance(context, MutableMapping) else None
        return await self._settler.settle_pending(mapping)

    async def resolve(
        self,
        intent_id: str,
        outcome: Resolution | str,
        *,
        reason: str,
        actor: str | None = None,
        override: bool = False,
    ) -> Decision:
        """An operator's resolution of a pending intent, recorded in the trail with ``actor``
        (default: this user and host) and ``reason``, and returned.

        ``committed``: the batch is in the history; settle it, never replay it. ``replay``:
        append the batch now, once; refused while the rule does not see the history the write
        was meant for, unless ``override``. ``abandon``: drop the intent; the history stays as
        it is. The intent is claimed as a settling worker claims it, so a resolution never
        races another settlement. Raises ``ResolutionRefused`` (nothing written) otherwise.
        """
        return await self._resolver.resolve(
            intent_id, outcome, reason=reason, actor=actor, override=override
        )

    async def resolve_effect(
        self,
        key: str,
        outcome: str,
        *,
        reason: str,
        actor: str | None = None,
        output: Any = None,
    ) -> Decision:
        """An operator's resolution of a tool effect whose outcome is unknown (an intent
        without a receipt): ``committed`` with ``output`` (the receipt; the body never runs),
        ``retry`` (the next call runs the body again), or ``abandon``; recorded in the trail.
        Raises ``ResolutionRefused`` (nothing written) otherwise."""
        return await self._resolver.resolve_effect(
            key, outcome, reason=reason, actor=actor, output=output
        )

    async def decisions(self, limit: int = 100) -> list[Decision]:
        """This session's recorded decisions, newest first."""
        journal = self._client.for_reading(active=self._active)
        if journal is None:
            return []
        return await journal.decisions(session_id=self.session_id, limit=limit)

    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """``base`` (or a new ``RunConfig``) with the gate installed before every model call."""
        self._gate_seen = True
        settings = base.session_settings if base is not None else None
        if settings is not None and settings.limit is not None:
            # A fresh run of this config reads the history through this limit.
            self._history_limits.add(settings.limit)
        return self._gatekeeper().run_config(base)

    def hooks(self, base: RunHooks[Any] | None = None) -> RunHooks[Any]:
        """``RunHooks`` whose ``on_llm_start`` runs the gate, delegating everything to ``base``.

        Hooks cannot shape the model's input: use ``run_config()`` as well to keep a retried
        input from reaching the model twice.
        """
        self._gate_seen = True
        return self._gatekeeper().hooks(base)

    def _gatekeeper(self) -> Gating:
        """What the gate asks before each model call."""
        return self._admission

    def _notice_ungated(self) -> None:
        """A run reached this session without the gate: say so once, naming the fix."""
        if not self._active or default_runner.installed():
            self._gate_seen = True
            return
        self._gate_seen = True
        warnings.warn(
            f"ReconcilingSession {self.session_id!r} is used by a run without its gate: pending "
            "writes are still settled when the session is read or written, but nothing stops "
            "a model call (or a resumed RunState's approved tool) on history nobody vouched "
            "for. Call agents_reconcile.install() once at startup, or pass "
            "run_config=session.run_config() and hooks=session.hooks() to every run.",
            default_runner.UngatedRunWarning,
            stacklevel=3,
        )
