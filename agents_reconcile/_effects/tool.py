"""Effect tools: function tools whose body has an external effect (a payment, a message, a
deployment), run at most once per idempotency key with a receipt as evidence.

``effect_tool`` is used like the SDK's ``function_tool`` (same keywords: approvals with
``needs_approval``, tool guardrails, strict schemas; not ``timeout``, which it refuses);
``as_effect_tool`` wraps an existing ``FunctionTool``. Around the body, for each call:

- the key is derived from the session, the tool call id, the tool name and the canonical
  arguments (``records.effect_key``), or, when the tool is given ``key=`` (a function of the
  call's arguments naming the effect in the application's own terms: an order id), from the
  tool name and that key alone (``records.business_effect_key``), so a call the model makes
  again under a new call id is the same effect; the body reads it with ``current_effect()``,
  to give it to an API that dedupes on an idempotency key;
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
import json
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NoReturn, overload

from .._core.cancellation import not_if_cancelled
from .._core.crashpoints import CrashPoint, reached
from .._core.effect_records import (
    Effect,
    EffectState,
    arguments_digest,
    business_effect_key,
    effect_key,
    shown_output,
)
from .._core.fingerprint import item_digest
from .._core.ownership import current_owner
from .._core.run_context import context_of, gated_session
from ..errors import ReconcileError
from . import holds
from .options import (
    checked_check,
    checked_flag,
    checked_function_tool_options,
    checked_key,
    checked_tool,
)

if TYPE_CHECKING:
    from agents import FunctionTool
    from agents.tool_context import ToolContext

    from .._backends.components import JournalEffects
    from .._backends.journal import IntentJournal
    from .._session.session import ReconcilingSession

__all__ = [
    "NOT_FOUND",
    "EffectCall",
    "as_effect_tool",
    "current_effect",
    "effect_tool",
    "effects_of",
]

NOT_FOUND: Final = object()
"""What a ``check(key)`` returns when the external system holds no effect under the key."""

_CALL: ContextVar[EffectCall | None] = ContextVar("agents_reconcile_effect", default=None)

RUNNING_WAIT_SECONDS: float = 10.0
"""How long a call waits for this process to finish settling its key in the background (a
sync body whose caller was cancelled, running on in its thread) before it is refused."""

Check = Callable[[str], Any]
"""``check(key)``: async, or sync (run in a worker thread, as the SDK runs a sync tool)."""

Key = Callable[[dict[str, Any]], str]
"""``key(arguments)``: the effect's own key (an order id) from the call's arguments, a str."""


@dataclass
class EffectCall:
    """The effect a tool body is running under: its key (give it to the external API as the
    idempotency key), and how many times a body has been started under it."""

    key: str
    tool: str
    call_id: str
    attempt: int
    _effect: Effect
    _effects: JournalEffects
    _receipt_error: BaseException | None = None
    _started: bool = False
    """The body was entered."""
    _thread: asyncio.Future[Any] | None = None
    """A sync body's run in its worker thread (it runs on if the caller is cancelled)."""
    _receipt: asyncio.Future[Any] | None = None
    """The receipt's write, once the body returned."""


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
    *,
    check: Callable[[str], Any] | None = None,
    idempotent: bool = False,
    key: Callable[[dict[str, Any]], str] | None = None,
    **function_tool_options: Any,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def effect_tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    check: Callable[[str], Any] | None = None,
    idempotent: bool = False,
    key: Callable[[dict[str, Any]], str] | None = None,
    **function_tool_options: Any,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """``function_tool`` for a body with an external effect (see the Tool effects page). Use
    it bare (``@effect_tool``) or with options (``@effect_tool(check=..., needs_approval=True)``);
    every option of ``function_tool`` but ``timeout`` (refused: a timed-out body may still have
    had its effect) is accepted and behaves as there. ``key``: a function of the call's
    arguments (a dict) returning the effect's own key (``lambda args: args["order_id"]``),
    so that a call the model makes again under a new call id is the same effect; without it,
    each tool call is an effect of its own. Every option is checked now
    (``ConfigurationError`` naming it), before any call."""
    from ..errors import ConfigurationError

    where = "effect_tool"
    if func is not None and not callable(func):
        raise ConfigurationError(f"{where}: the tool's body must be a function, not {func!r}")
    checked_check(check, where)
    checked_flag("idempotent", idempotent, where)
    checked_key(key, where)
    _refuse_timeout(function_tool_options.get("timeout"), where)
    checked_function_tool_options(function_tool_options, where)

    def build(body: Callable[..., Any]) -> FunctionTool:
        from agents import function_tool

        tool = function_tool(_recording(body), **function_tool_options)
        return as_effect_tool(tool, check=check, idempotent=idempotent, key=key, _recorded=True)

    return build if func is None else build(func)


def as_effect_tool(
    tool: FunctionTool,
    *,
    check: Callable[[str], Any] | None = None,
    idempotent: bool = False,
    key: Callable[[dict[str, Any]], str] | None = None,
    _recorded: bool = False,
) -> FunctionTool:
    """An existing ``FunctionTool`` as an effect tool: the same tool (name, schema, approvals,
    guardrails), its invocation wrapped. Built from the SDK's ``function_tool``, its body is
    wrapped so a receipt is written only when it returns; any other tool's output (even an
    error message its failure function made) is taken as returned. ``key`` as for
    ``effect_tool``. Every option is checked now (``ConfigurationError`` naming it), before
    any call."""
    checked_tool(tool, "as_effect_tool")
    where = f"as_effect_tool (tool {tool.name!r})"
    checked_check(check, where)
    checked_flag("idempotent", idempotent, where)
    checked_key(key, where)
    checked_flag("_recorded", _recorded, where)
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
        return await _invoke(
            tool.name, original, ctx, input_json, check, idempotent, _recorded, key
        )

    return dataclasses.replace(tool, on_invoke_tool=invoke)


async def _invoke(
    name: str,
    original: Callable[[Any, str], Awaitable[Any]],
    ctx: Any,
    input_json: str,
    check: Check | None,
    idempotent: bool,
    recorded_inside: bool,
    key: Key | None = None,
) -> Any:
    from ..errors import ConfigurationError

    session = _session_of(ctx)
    if session is None:
        raise ConfigurationError(
            f"effect tool {name!r} ran in a run without a ReconcilingSession's gate: its "
            "effects need the session's journal (run_config=session.run_config(), or "
            "agents_reconcile.install())"
        )
    effects = effects_of(session.journal)
    # A resumed state older than the retention may have lost this call's receipt: refused
    # before anything is recorded, never run again on a missing receipt's word.
    await session.carried.refuse_if_expired(context_of(ctx))
    keyring = session.journal_client.keyring
    effect = Effect(
        key=_key_of(name, key, session.session_id, ctx.tool_call_id, input_json),
        session_id=session.session_id,
        tool=name,
        call_id=ctx.tool_call_id,
        arguments_digest=arguments_digest(input_json),
        owner=str(session.journal_client.owner),  # its lease stamped with it
        started_at=time.time(),
        seal_key=keyring.current,
        sign_key=keyring.signer.current if keyring.signer is not None else None,
    )
    # Journal writes that may land after a cancelled caller is gone are waited out this long.
    bound = session.config.lease_seconds
    holder = object()
    reached(CrashPoint.BEFORE_EFFECT_INTENT)
    if holds.finishing(effect.key):
        # An earlier call of this process left it settling in the background: its receipt
        # may be a moment away.
        await holds.wait_while_finishing(effect.key, RUNNING_WAIT_SECONDS)

    async def unbegun(begun: tuple[Effect, bool]) -> None:
        if begun[1]:  # recorded, and the caller is gone: no body ran
            await holds.release(effects, effect, holds.NEVER_STARTED_OWNER)

    # Its receipt is sealed where the session seals: the journal says so first.
    await session.journal_client.mark_sealed()
    begin = effects.begin(effect)
    stored, recorded = await holds.step(effect.key, holder, begin, bound, unbegun)
    if not recorded:
        if stored.state is EffectState.DONE:
            return stored.output
        effect = await _unknown(session, effects, stored, effect, check, idempotent, holder)
        if effect.state is EffectState.DONE:
            return effect.output
    call = EffectCall(effect.key, name, effect.call_id, effect.attempts, effect, effects)
    reached(CrashPoint.BEFORE_EFFECT)
    token = _CALL.set(call)
    holds.hold(effect.key, holder)
    try:
        return await _run(session, call, original, ctx, input_json, recorded_inside, holder)
    finally:
        _CALL.reset(token)
        holds.let_go(effect.key, holder)


async def _run(
    session: ReconcilingSession,
    call: EffectCall,
    original: Callable[[Any, str], Awaitable[Any]],
    ctx: Any,
    input_json: str,
    recorded_inside: bool,
    holder: object,
) -> Any:
    """The tool's own invocation under ``call``, and what its end leaves in the journal."""
    effect, effects = call._effect, call._effects
    bound = session.config.lease_seconds
    try:
        output = await original(ctx, input_json)
    except asyncio.CancelledError:
        if call._receipt_error is not None:
            raise
        # The caller is gone; what the body started is settled in the background.
        holds.finish_in_background(effect.key, holder, _after_cancel(call, recorded_inside, bound))
        raise
    except BaseException as exc:
        if call._receipt_error is None:
            # No output was made of it: the body ended (or never started) without a receipt.
            owner = _ended(call, recorded_inside)
            with contextlib.suppress(ReconcileError):  # the tool's own error matters more
                await holds.step(effect.key, holder, holds.release(effects, effect, owner), bound)
            raise
        # The body returned (the effect happened) and its receipt was not written, cancelled
        # or failed: never an ordinary tool error the run would go on from.
        await _refuse(session, effect, "its receipt could not be written", exc)
    if call._receipt_error is not None:
        await _refuse(session, effect, "its receipt could not be written", call._receipt_error)
    if not recorded_inside:
        receipt = effect.with_receipt(output, at=time.time())
        await holds.step(effect.key, holder, effects.finish(receipt), bound)
    elif call._receipt is None:
        # The SDK's failure handling made an error output of a body that raised (or of
        # arguments refused before it): what the model was shown is vouched for by its
        # digest (a failure receipt); the outcome stays unknown, and nobody runs the body.
        digest = item_digest({"output": shown_output(output)})
        release = holds.release(effects, effect, _ended(call, recorded_inside), digest)
        with contextlib.suppress(ReconcileError):  # unrecorded, the turn may be denied later
            await holds.step(effect.key, holder, release, bound)
    return output


def _ended(call: EffectCall, recorded_inside: bool) -> str:
    """The owner that says how a body that left no receipt ended."""
    started = call._started or not recorded_inside
    return holds.ENDED_OWNER if started else holds.NEVER_STARTED_OWNER


async def _after_cancel(call: EffectCall, recorded_inside: bool, bound: float) -> None:
    """The call's caller was cancelled: settle the effect's record once what the body
    started has ended (in the background: a sync body runs on in its worker thread, and the
    key stays held until it returns and its receipt is written)."""
    effect, effects = call._effect, call._effects
    try:
        if call._receipt is not None:  # the body returned: its receipt lands
            await asyncio.wait_for(asyncio.shield(call._receipt), bound)
            return
        if call._thread is not None:
            output = await call._thread  # no bound: the body is running
            receipt = effect.with_receipt(output, at=time.time())
            await asyncio.wait_for(effects.finish(receipt), bound)
            return
    except asyncio.CancelledError:
        raise
    except BaseException:  # the body raised, or its receipt failed: the outcome is unknown
        await asyncio.wait_for(holds.release(effects, effect, holds.ENDED_OWNER), bound)
        return
    await asyncio.wait_for(holds.release(effects, effect, _ended(call, recorded_inside)), bound)


async def _unknown(
    session: ReconcilingSession,
    effects: JournalEffects,
    stored: Effect,
    mine: Effect,
    check: Check | None,
    idempotent: bool,
    holder: object,
) -> Effect:
    """An intent without a receipt: the body may or may not have run. Settled by the tool's
    ``check``, re-run under the key when the tool is idempotent, refused otherwise. A body
    that never started (or one an operator asked to re-run) runs without asking."""
    from .resolve_effect import RETRY_OWNER

    rerun = stored.owner in (RETRY_OWNER, holds.NEVER_STARTED_OWNER)
    if not rerun and _held(stored, session):
        # Its body may be running right now (here or in a live worker): neither a check nor a
        # re-run can be trusted until it ends.
        await _refuse(session, stored, "its body is running under a live owner")
    found = NOT_FOUND
    if rerun:
        pass  # nothing ran under the key since it was last known not to have happened
    elif check is not None:
        found = await _ask(check, stored.key)
    elif not idempotent:
        await _refuse(session, stored, "an earlier call started it and left no receipt")
    taken = dataclasses.replace(
        stored,
        owner=mine.owner,
        started_at=mine.started_at,  # a lease runs from the takeover
        attempts=stored.attempts + 1,
        seal_key=mine.seal_key,
        sign_key=mine.sign_key,
        age=None,
    )
    bound = session.config.lease_seconds

    async def untaken(took: bool) -> None:
        # The caller is gone before the body ran: as it was, less a check's answer.
        if took and found is NOT_FOUND:
            await holds.release(effects, taken, holds.NEVER_STARTED_OWNER)
        elif took:
            await effects.finish(taken.with_receipt(found, at=time.time()))

    restart = effects.restart(taken, expect_owner=stored.owner)
    if not await holds.step(stored.key, holder, restart, bound, untaken):
        # Someone else took it meanwhile (or finished it): judged again, from what is there.
        again = await effects.get(stored.key)
        if again is not None and again.state is EffectState.DONE:
            return again
        await _refuse(session, again or stored, "another worker took it over meanwhile")
    if found is NOT_FOUND:
        return taken
    # The external system holds the effect: its answer becomes the receipt; nothing runs.
    receipt = taken.with_receipt(found, at=time.time())
    done: Effect = await holds.step(stored.key, holder, effects.finish(receipt), bound)
    return done


async def _ask(check: Check, key: str) -> Any:
    """``check(key)``: awaited when async; a sync one runs in a worker thread."""
    if inspect.iscoroutinefunction(check) or inspect.iscoroutinefunction(
        getattr(check, "__call__", None)  # noqa: B004 - an object with an async __call__
    ):
        return await check(key)
    found = await asyncio.to_thread(check, key)
    if inspect.isawaitable(found):  # a sync callable that returns an awaitable
        found = await found
    return found


async def _refuse(
    session: ReconcilingSession, effect: Effect, problem: str, cause: BaseException | None = None
) -> NoReturn:
    """Refuse the call with ``EffectUnknown``, recorded in the trail (for an operator)."""
    from .._core.records import Action, Outcome, Reason
    from ..errors import EffectUnknown

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


def _key_of(name: str, key: Key | None, session_id: str, call_id: str, input_json: str) -> str:
    """The call's idempotency key: of the tool's own ``key`` of the arguments when it has one,
    else of the session, the call id and the arguments. Arguments that are no JSON object
    (refused by the SDK before any body runs) keep the call's own key. A ``key`` that raises
    or returns anything but a non-empty str is refused before anything is written (its
    value and message left out of the error: they may hold the arguments)."""
    if key is None:
        return effect_key(session_id, call_id, name, input_json)
    try:
        arguments = json.loads(input_json) if input_json else {}
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        return effect_key(session_id, call_id, name, input_json)
    from ..errors import ConfigurationError

    where = f"effect tool {name!r}: its key function"
    try:
        found = key(arguments)
    except Exception as exc:
        raise ConfigurationError(
            f"{where} raised {type(exc).__name__} (its cause, below; nothing was recorded and "
            "the body did not run)"
        ) from exc
    if not isinstance(found, str) or not found:
        raise ConfigurationError(
            f"{where} returned {'an empty str' if found == '' else type(found).__name__}, "
            "not a non-empty str (nothing was recorded and the body did not run)"
        )
    return business_effect_key(name, found)


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
    another process alive on this host (or, on another host, within its lease, judged on
    the journal's clock: ``Effect.held_for``)."""
    from .._core.ownership import Owner
    from .._core.ownership import holds as owner_holds

    try:
        owner = Owner.parse(effect.owner)
    except ValueError:
        return False
    return owner_holds(
        owner,
        active=True,
        in_flight_here=holds.running(effect.key),
        age_seconds=effect.held_for(time.time()),
        lease_seconds=session.config.lease_seconds,
        me=current_owner(),
    )


def _session_of(ctx: Any) -> ReconcilingSession | None:
    """The run's ``ReconcilingSession``: the one whose gate the run's config holds (given by
    ``session.run_config()`` or the installed runner). Nothing else names it for sure: a
    resumed checkpoint runs its approved tools before it reads the session."""
    run_config = getattr(ctx, "run_config", None)
    found: ReconcilingSession | None = gated_session(run_config) if run_config is not None else None
    return found


def effects_of(journal: IntentJournal) -> JournalEffects:
    """``journal``'s effects component, refused when it has none."""
    from ..errors import ConfigurationError

    effects = journal.effects
    if effects is None:
        raise ConfigurationError(
            f"{type(journal).__qualname__} has no effects component (its effects is None): an "
            "effect tool needs a journal that keeps effects (every journal of this package "
            "does)"
        )
    return effects


def _recording(body: Callable[..., Any]) -> Callable[..., Any]:
    """``body``, writing the effect's receipt when it returns (inside the SDK's failure
    handling: a body that raises leaves no receipt, and its error goes where it always goes).
    A sync body still runs in a worker thread, as the SDK runs it; if the caller is cancelled
    the thread runs on, and the call hands it (and its receipt) to the background."""

    @functools.wraps(body)
    async def recording(*args: Any, **kwargs: Any) -> Any:
        call = _CALL.get()
        await not_if_cancelled()  # a body whose caller is gone already never starts
        if call is not None:
            call._started = True
        if inspect.iscoroutinefunction(body):
            output = await body(*args, **kwargs)
        else:
            thread = asyncio.ensure_future(asyncio.to_thread(body, *args, **kwargs))
            if call is not None:
                call._thread = thread
            output = await asyncio.shield(thread)
        if call is None:
            return output
        reached(CrashPoint.BEFORE_RECEIPT)
        try:
            receipt = call._effect.with_receipt(output, at=time.time())
            call._receipt = asyncio.ensure_future(call._effects.finish(receipt))
            await asyncio.shield(call._receipt)
        except asyncio.CancelledError:
            raise  # the receipt's write is waited out in the background
        except BaseException as exc:
            # The effect happened and its receipt may not be durable: the run must not go
            # on as if all were well (the outer wrapper raises, past the failure handler).
            call._receipt_error = exc
            raise
        reached(CrashPoint.AFTER_RECEIPT)
        return output

    return recording
