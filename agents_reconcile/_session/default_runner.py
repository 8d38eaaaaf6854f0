"""``session=`` alone is enough: a process-wide switch that puts the gate into every run.

``install()`` places a ``ReconcilingRunner`` in front of the SDK's default runner (the one
``Runner.run``, ``Runner.run_sync`` and ``Runner.run_streamed`` hand every call to). For a call
given a ``ReconcilingSession``, it composes the session's gate into the caller's ``run_config``
and its hooks into the caller's ``hooks``, exactly as ``session.run_config(...)`` and
``session.hooks(...)`` do by hand, fresh or resumed; every other call passes through unchanged.
A runner someone else installed before stays in place behind it. ``uninstall()`` takes it away.

The SDK marks its default-runner hook experimental: when it is missing, ``install()`` says so
(a warning naming the by-hand form) and changes nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any, Final, Protocol

from agents import RunConfig, RunHooks
from agents.lifecycle import RunHooksBase

from .._sdk import DEFAULT_RUNNER, require
from .config import env_switch

__all__ = [
    "ENV_INSTALL",
    "ReconcilingRunner",
    "UngatedRunWarning",
    "gated_config",
    "install",
    "installed",
    "uninstall",
]

logger = logging.getLogger("agents_reconcile")

ENV_INSTALL: Final = "AGENTS_RECONCILE_INSTALL"
"""Set to ``1`` (``true``, ``on``, ``yes``), the first ``ReconcilingSession`` built installs the
gate, as ``ReconcileConfig(install=True)`` does."""

_BY_HAND: Final = (
    "pass run_config=session.run_config(...) and hooks=session.hooks(...) on every run"
)
_lock = threading.Lock()

try:  # The SDK's default-runner hook (experimental in the SDK: checked, not assumed).
    from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner
except ImportError:  # pragma: no cover - an SDK without the hook: install() says so
    AgentRunner = object  # type: ignore[misc,assignment]
    get_default_agent_runner = set_default_agent_runner = None  # type: ignore[assignment]


GATED_MARK: Final = "__agents_reconcile_gated__"
"""Class attribute of a session this runner gates (``ReconcilingSession`` sets it)."""


class GatedSession(Protocol):
    """What the runner needs of a session it gates."""

    @property
    def enabled(self) -> bool: ...

    def run_config(self, base: RunConfig | None = None) -> RunConfig: ...

    def hooks(self, base: RunHooks[Any] | None = None) -> RunHooks[Any]: ...


class UngatedRunWarning(UserWarning):
    """A run used a ``ReconcilingSession`` without its gate: pending writes are settled when
    the session is read or written, but nothing stops a model call on unvouched history."""


def env_install() -> bool:
    """Whether ``AGENTS_RECONCILE_INSTALL`` asks for the gate in every run: read as
    ``AGENTS_RECONCILE`` is, and a value that is no on/off word raises ``ConfigurationError``."""
    return env_switch(ENV_INSTALL) is True


class ReconcilingRunner(AgentRunner):
    """The SDK's default runner, with the gate composed into every call that is given a
    ``ReconcilingSession``; ``base`` (the runner that was in place) runs the call."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.active = True

    async def run(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        return await self.base.run(starting_agent, input, **self.gated(kwargs))

    def run_sync(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        # The base's run_sync calls the base's run, not this one: gated once.
        return self.base.run_sync(starting_agent, input, **self.gated(kwargs))

    def run_streamed(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        return self.base.run_streamed(starting_agent, input, **self.gated(kwargs))

    def gated(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` with the session's gate composed into ``run_config`` and ``hooks``."""
        session: GatedSession | None = kwargs.get("session")
        gated = session is not None and getattr(type(session), GATED_MARK, False)
        if not self.active or session is None or not gated or not session.enabled:
            return kwargs
        kwargs = dict(kwargs)
        kwargs["run_config"] = gated_config(session, kwargs.get("run_config"))
        hooks = kwargs.get("hooks")
        if hooks is None or isinstance(hooks, RunHooksBase):
            kwargs["hooks"] = session.hooks(hooks)
        # Anything else is left for the SDK to refuse with its own error.
        return kwargs


def gated_config(session: GatedSession, given: Any) -> Any:
    """The caller's ``run_config`` with the gate composed in, keeping what "no config" and
    a mapping mean to the SDK: a runner that gets no model provider owns (and closes) the one
    it makes, so the provider is left out unless the caller gave one."""
    if isinstance(given, RunConfig):
        return session.run_config(given)
    if given is not None and not isinstance(given, dict):
        return given  # the SDK refuses it with its own error
    mapping: dict[str, Any] = dict(given or {})
    try:
        base = RunConfig(**mapping)
    except TypeError:
        return given  # an unknown key: the SDK's own error says which
    gated = session.run_config(base)
    for field in dataclasses.fields(RunConfig):
        value = getattr(gated, field.name)
        if field.name in mapping or value is not getattr(base, field.name):
            mapping[field.name] = value
    return mapping


def install() -> bool:
    """Put the gate into every ``Runner.run``, ``run_sync`` and ``run_streamed`` that is given
    a ``ReconcilingSession``. Idempotent; returns True once the gate is installed.

    ``UnsupportedSDK`` (nothing installed) when this SDK has no default-runner hook: runs
    would go ungated while the caller believes otherwise."""
    with _lock:
        if get_default_agent_runner is None or set_default_agent_runner is None:
            require(DEFAULT_RUNNER, instead=f"Without it, {_BY_HAND}.")
        current = get_default_agent_runner()
        found = _ours(current)
        if found is not None:
            found.active = True
            return True
        set_default_agent_runner(ReconcilingRunner(current))
        logger.info("the reconciling gate is installed in the SDK's default runner")
        return True


def uninstall() -> None:
    """Take the gate out of the default runner again. If another runner was installed in
    front of it since, it stays in the chain and only passes calls through."""
    with _lock:
        if get_default_agent_runner is None or set_default_agent_runner is None:
            return
        current = get_default_agent_runner()
        if isinstance(current, ReconcilingRunner):
            set_default_agent_runner(current.base)
            return
        found = _ours(current)
        if found is not None:
            found.active = False


def installed() -> bool:
    """Whether runs get the gate without ``run_config=`` (``install()`` is in effect)."""
    if get_default_agent_runner is None:
        return False
    found = _ours(get_default_agent_runner())
    return found is not None and found.active


def _ours(runner: Any) -> ReconcilingRunner | None:
    """Our runner in the chain of runners that wrap one another (through ``base``)."""
    seen: set[int] = set()
    while runner is not None and id(runner) not in seen:
        if isinstance(runner, ReconcilingRunner):
            return runner
        seen.add(id(runner))
        runner = getattr(runner, "base", None)
    return None
