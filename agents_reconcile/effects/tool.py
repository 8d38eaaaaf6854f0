"""Effect tools: function tools whose body has an external effect (a payment, a message, a
deployment), run at most once per idempotency key with a receipt as evidence.

``effect_tool`` is used like the SDK's ``function_tool`` (same keywords: approvals with
``needs_approval``, tool guardrails, timeouts, strict schemas); ``as_effect_tool`` wraps an
existing ``FunctionTool``. Around the body, for each call:

- the key is derived from the session, the tool call id, the tool name and the canonical
  arguments (``records.effect_key``); the body reads it with ``current_effect()``, to give it
  to an API that dedupes on an idempotency key;
- the effect's intent is durable in the session's journal before the body runs, and its
  receipt (the output) is durable before the output goes back to the runner;
- a later call with the same key (a resumed approval checkpoint, a retried run, another
  worker) returns the recorded output without running the body; when only the intent is
  there (the outcome is unknown), the tool's ``check(key)`` is asked (it returns the output if
  the effect happened, ``NOT_FOUND`` if it did not), or the body runs again under the same key
  when the tool is ``idempotent``; otherwise ``EffectUnknown`` is raised before the body runs.

The session is the ``ReconcilingSession`` whose gate the run uses (``run_config=
session.run_config()``, or ``agents_reconcile.install()``); an effect tool in a run without
one is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NoReturn, overload

from ..crashpoints import CrashPoint, reached
from ..errors import ReconcileError
from ..ownership import current_owner
from .records import Effect, EffectState, arguments_digest, effect_key

if TYPE_CHECKING:
    from agents import FunctionTool
    from agents.tool_context import ToolContext

    from ..journal.base import EffectJournal
    from ..session import ReconcilingSession

__all__ = [
    "NOT_FOUND",
    "EffectCall",
    "as_effect_tool",
    "current_effect",
    "effect_journal",
    "effect_tool",
]

NOT_FOUND: Final = object()
"""What a ``check(key)`` returns when the external system holds no effect under the key."""

_CALL: ContextVar[EffectCall | None] = ContextVar("agents_reconcile_effect", default=None)
_RUNNING: set[str] = set()
"""The effect keys whose body a task of this process is running now."""

Check = Callable[[str], Awaitable[Any]]


@dataclass
class EffectCall:
    """The effect a tool body is running under: its key (give it to the external API as the
    idempotency key), and how many times a body has been started under it."""

    key: str
    tool: str
    call_id: str
    attempt: int
    _effect: Effect
    _journal: Any
    _receipt_error: BaseException | None = None


def current_effect() -> EffectCall:
    """The effect the calling tool body runs under (inside an effect tool only)."""
    call = _CALL.get()
    if call is None:
        raise LookupError("current_effect() is only known inside an effect tool's body")
    return call


@overload
def effect_tool(func: Callable[..., Any], /) -> FunctionTool: ...


@overload
def effect_tool(
    *, check: Check | None = None, idempotent: bool = False, **function_tool_options: Any
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def effect_tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    check: Check | None = None,
    idempotent: bool = False,
    **function_tool_options: Any,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """``function_tool`` for a body with an external effect (see the module docstring). Use it
    bare (``@effect_tool``) or with options (``@effect_tool(check=..., needs_approval=True)``);
    every option of ``function_tool`` is accepted and behaves as there."""

    _refuse_timeout(function_tool_options.get("timeout"), "effect_tool")

    def build(body: Callable[..., Any]) -> FunctionTool:
        from agents import function_tool

        tool = function_tool(_recording(body), **function_tool_options)
        return as_effect_tool(tool, check=check, idempotent=idempotent, _recorded=True)

    return build if func is None else build(func)


def as_effect_tool(
    tool: FunctionTool,
    *,
    check: Check | None = None,
    idempotent: bool = False,
    _recorded: bool = False,
) -> FunctionTool:
    """An existing ``FunctionTool`` as an effect tool: the same tool (name, schema, approvals,
    guardrails), its invocation wrapped. Built from the SDK's ``function_tool``, its body is
    wrapped so a receipt is written only when it returns; any other tool's output (even an
    error message its failure function made) is taken as returned."""
    _refuse_timeout(getattr(tool, "timeout_seconds", None), f"tool {tool.name!r}")
    original = tool.on_invoke_tool
    if not _recorded:
        wrapped = getattr(tool, "__wrapped__", None)
        if callable(wrapped):
            from agents import function_tool

            # Its invoker rebuilt around its own body, so an error is not taken for an output;
            # bound to the tool itself, so its own failure handling applies. Everything else
            # (schema, approvals, guardrails, timeouts) stays the tool's own.
            rebuilt = function_tool(
                _recording(wrapped),
                name_override=tool.name,
                description_override=tool.description,
                strict_mode=tool.strict_json_schema,
            ).on_invoke_tool
            bind = getattr(rebuilt, "__agents_bind_function_tool__", None)
            original = bind(tool) if callable(bind) else rebuilt
            _recorded = True

    async def invoke(ctx: ToolContext[Any], input_json: str) -> Any:
        return await _invoke(tool.name, original, ctx, input_json, check, idempotent, _recorded)

    return dataclasses.replace(tool, on_invoke_tool=invoke)


async def _invoke(
    name: str,
    original: Callable[[Any, str], Awaitable[Any]],
    ctx: Any,
    input_json: str,
    check: Check | None,
    idempotent: bool,
    recorded_inside: bool,
) -> Any:
    from ..errors import ConfigurationError

    session = _session_of(ctx)
    if session is None:
        raise ConfigurationError(
            f"effect tool {name!r} ran in a run without a ReconcilingSession's gate: its "
            "effects need the session's journal (run_config=session.run_config(), or "
            "agents_reconcile.install())"
        )
    journal = effect_journal(session)
    keyring = session.journal_client.keyring
    effect = Effect(
        key=effect_key(session.session_id, ctx.tool_call_id, name, input_json),
        session_id=session.session_id,
        tool=name,
        call_id=ctx.tool_call_id,
        arguments_digest=arguments_digest(input_json),
        owner=str(current_owner()),
        started_at=time.time(),
        seal_key=keyring.current,
        sign_key=keyring.signer,
    )
    reached(CrashPoint.BEFORE_EFFECT_INTENT)
    stored, recorded = await journal.begin_effect(effect)
    if not recorded:
        if stored.state is EffectState.DONE:
            return stored.output
        effect = await _unknown(session, journal, stored, effect, check, idempotent)
        if effect.state is EffectState.DONE:
            return effect.output
    call = EffectCall(effect.key, name, effect.call_id, effect.attempts, effect, journal)
    reached(CrashPoint.BEFORE_EFFECT)
    token = _CALL.set(call)
    _RUNNING.add(effect.key)
    try:
        output = await original(ctx, input_json)
    except BaseException as exc:
        if call._receipt_error is None:
            raise
        # The body returned (the effect happened) and its receipt was not written, cancelled
        # or failed: never an ordinary tool error the run would go on from.
        await _refuse(session, effect, "its receipt could not be written", exc)
    finally:
        _RUNNING.discard(effect.key)
        _CALL.reset(token)
    if call._receipt_error is not None:
        await _refuse(session, effect, "its receipt could not be written", call._receipt_error)
    if not recorded_inside:
        await journal.finish_effect(effect.with_receipt(output, at=time.time()))
    return output


async def _unknown(
    session: ReconcilingSession,
    journal: EffectJournal,
    stored: Effect,
    mine: Effect,
    check: Check | None,
    idempotent: bool,
) -> Effect:
    """An intent without a receipt: the body may or may not have run. Settled by the tool's
    ``check``, re-run under the key when the tool is idempotent, refused otherwise."""
    from .resolution import RETRY_OWNER

    if stored.owner != RETRY_OWNER and _held(stored, session):
        # Its body may be running right now (here or in a live worker): neither a check nor a
        # re-run can be trusted until it ends.
        await _refuse(session, stored, "its body is running under a live owner")
    found = NOT_FOUND
    if stored.owner == RETRY_OWNER:
        pass  # an operator asked for the body to run again
    elif check is not None:
        found = await check(stored.key)
    elif not idempotent:
        await _refuse(session, stored, "an earlier call started it and left no receipt")
    taken = dataclasses.replace(
        stored,
        owner=mine.owner,
        started_at=mine.started_at,  # a lease runs from the takeover
        attempts=stored.attempts + 1,
        seal_key=mine.seal_key,
        sign_key=mine.sign_key,
    )
    if not await journal.restart_effect(taken, expect_owner=stored.owner):
        # Someone else took it meanwhile (or finished it): judged again, from what is there.
        again = await journal.effect(stored.key)
        if again is not None and again.state is EffectState.DONE:
            return again
        await _refuse(session, again or stored, "another worker took it over meanwhile")
    if found is NOT_FOUND:
        return taken
    # The external system holds the effect: its answer becomes the receipt; nothing runs.
    return await journal.finish_effect(taken.with_receipt(found, at=time.time()))


async def _refuse(
    session: ReconcilingSession, effect: Effect, problem: str, cause: BaseException | None = None
) -> NoReturn:
    """Refuse the call with ``EffectUnknown``, recorded in the trail (for an operator)."""
    from ..errors import EffectUnknown
    from ..records import Action, Outcome, Reason

    client = session.journal_client
    decision = client.decision(
        None,
        Outcome.AMBIGUOUS,
        Reason.EFFECT_UNKNOWN,
        Action.DENIED,
        {
            "effect": effect.key,
            "tool": effect.tool,
            "call_id": effect.call_id,
            "owner": effect.owner,
            "started_at": effect.started_at,
            "attempts": effect.attempts,
            "problem": problem,
        },
        intent_id=effect.key,
    )
    with contextlib.suppress(ReconcileError):  # the refusal stands without its record
        await client.note_once(decision)
    client.trail.decided(decision)
    raise EffectUnknown(decision) from cause


def _refuse_timeout(timeout: Any, what: str) -> None:
    """A tool timeout abandons the body's task and lets the run go on: the effect may still
    happen with no receipt, and the model may call again under a new key. Refused."""
    if timeout is not None:
        from ..errors import ConfigurationError

        raise ConfigurationError(
            f"{what}: an effect tool takes no timeout (a timed-out body may still charge, "
            "with no receipt); bound the external call inside the body instead"
        )


def _held(effect: Effect, session: ReconcilingSession) -> bool:
    """Whether a live owner may be running ``effect``'s body now: a task of this process, or
    another process alive on this host (or, on another host, within its lease)."""
    from ..ownership import Owner, holds

    try:
        owner = Owner.parse(effect.owner)
    except ValueError:
        return False
    return holds(
        owner,
        active=True,
        in_flight_here=effect.key in _RUNNING,
        age_seconds=time.time() - effect.started_at,
        lease_seconds=session.config.lease_seconds,
        me=current_owner(),
    )


def _session_of(ctx: Any) -> ReconcilingSession | None:
    """The run's ``ReconcilingSession``: the one whose gate the run's config holds (given by
    ``session.run_config()`` or the installed runner). Nothing else names it for sure: a
    resumed checkpoint runs its approved tools before it reads the session."""
    from ..gate import gated_session

    run_config = getattr(ctx, "run_config", None)
    found: ReconcilingSession | None = gated_session(run_config) if run_config is not None else None
    return found


def effect_journal(session: ReconcilingSession) -> EffectJournal:
    from ..errors import ConfigurationError
    from ..journal.base import EffectJournal

    journal = session.journal
    if not isinstance(journal, EffectJournal):
        raise ConfigurationError(
            f"{type(journal).__qualname__} does not keep effects (EffectJournal): an effect "
            "tool needs a journal that does (every journal of this package does)"
        )
    return journal


def _recording(body: Callable[..., Any]) -> Callable[..., Any]:
    """``body``, writing the effect's receipt when it returns (inside the SDK's failure
    handling: a body that raises leaves no receipt, and its error goes where it always goes).
    A sync body still runs in a worker thread, as the SDK runs it."""

    @functools.wraps(body)
    async def recording(*args: Any, **kwargs: Any) -> Any:
        if inspect.iscoroutinefunction(body):
            output = await body(*args, **kwargs)
        else:
            output = await asyncio.to_thread(body, *args, **kwargs)
        call = _CALL.get()
        if call is not None:
            reached(CrashPoint.BEFORE_RECEIPT)
            try:
                await call._journal.finish_effect(call._effect.with_receipt(output, at=time.time()))
            except BaseException as exc:
                # The effect happened and its receipt may not be durable: the run must not go
                # on as if all were well (the outer wrapper raises, past the failure handler).
                call._receipt_error = exc
                raise
            reached(CrashPoint.AFTER_RECEIPT)
        return output

    return recording
