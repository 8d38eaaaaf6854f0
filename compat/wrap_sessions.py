"""pytest plugin: every session the SDK's runner is given goes through ``ReconcilingSession``.

Load it with ``-p compat.wrap_sessions``. It patches ``AgentRunner.run``, ``run_streamed`` and
``run_sync`` on the class for the whole test session, so runs started through ``Runner.*``, an
``AgentRunner`` built by the test, or a default runner the test installs all pass through it.

Given ``--sdk-compat-wrap``, a ``session=`` that is not already a ``ReconcilingSession`` is
replaced by one around it (the same wrapper for the same session object within a test), and the
gate is composed the way a user composes it by hand: ``run_config=wrapper.run_config(...)`` and
``hooks=wrapper.hooks(...)``. With ``--sdk-compat-compose=installed`` it is composed the way the
runner that ``agents_reconcile.install()`` puts in place does it. Each test gets a journal of its
own: a fresh SQLite file (what users get by default) or, with ``--sdk-compat-journal=memory``, a
``MemoryJournal``. A session the wrapper refuses (``UnsupportedSession``, e.g. an
``OpenAIConversationsSession``) is left as it is and counted.

Without ``--sdk-compat-wrap`` the plugin only counts what each test hands the runner, so the
unwrapped pass says which tests exercise a session at all.

In every process it also refuses network connections to anything but loopback: the suite may
reach this machine and nothing else.

``--sdk-compat-results=PATH`` writes each test's outcome (and the counts above) as JSON;
``--sdk-compat-only=PATH`` keeps only the node ids listed in PATH (one a line).
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import json
import logging
import shutil
import socket
import tempfile
from collections import Counter
from collections.abc import Callable, Coroutine, Generator
from pathlib import Path
from typing import Any, Final

import pytest
from agents.lifecycle import RunHooksBase
from agents.run import AgentRunner

from agents_reconcile import (
    MemoryJournal,
    ReconcileConfig,
    ReconcilingSession,
    SQLiteJournal,
    UnsupportedSession,
)
from agents_reconcile._session.default_runner import ReconcilingRunner, gated_config

__all__ = [
    "PROPERTY",
    "Counts",
    "LoopbackOnly",
    "Outcomes",
    "Recorder",
    "WarningCounter",
    "Wrapping",
]

PROPERTY: Final = "sdk_compat"
"""The name of the user property that carries a test's counts to the report."""

_ENTRY_POINTS: Final = ("run", "run_streamed", "run_sync")
_LOCAL_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_DETAIL_CHARS: Final = 4000


# -- counting and wrapping ------------------------------------------------------------------


@dataclasses.dataclass
class Counts:
    """What one test handed the runner."""

    runs: int = 0
    """Runner calls given a session (not None)."""
    wrapped: int = 0
    """Of those, calls whose session this plugin wrapped."""
    wrappers: int = 0
    """Distinct ``ReconcilingSession`` objects this plugin built."""
    given_wrapped: int = 0
    """Calls given a ``ReconcilingSession`` by the test itself (passed on unchanged)."""
    refused: Counter[str] = dataclasses.field(default_factory=Counter)
    """Sessions the wrapper refused, by the refused type's name."""
    blocked: list[str] = dataclasses.field(default_factory=list)
    """Network destinations beyond loopback that were refused."""
    warnings: list[str] = dataclasses.field(default_factory=list)
    """Warnings the wrapper logged (a denial logs one): a test that passes with one may pass
    for another reason than the SDK's."""

    def as_json(self) -> str:
        data = dataclasses.asdict(self)
        data["refused"] = dict(self.refused)
        return json.dumps(data, sort_keys=True)


class Wrapping:
    """The per-test state: wrappers by session, the test's journal, and its counts."""

    def __init__(self, *, wrap: bool, journal: str, base: Path, compose: str = "by-hand") -> None:
        self.wrap = wrap
        self.journal_kind = journal
        self.compose = compose
        self.base = base
        self.counts = Counts()
        self._wrappers: dict[int, tuple[Any, ReconcilingSession]] = {}
        self._journal: MemoryJournal | Path | None = None
        self._tests = 0

    def begin_test(self) -> None:
        self.counts = Counts()
        self._wrappers.clear()
        self._journal = None
        self._tests += 1

    def end_test(self) -> None:
        self._wrappers.clear()
        journal, self._journal = self._journal, None
        if isinstance(journal, Path):
            # The file is shared per path within the process: close the connection it holds,
            # then remove the file (this plugin made it; the next test gets its own).
            _finish(SQLiteJournal.from_address(str(journal)).close())
            for suffix in ("", "-wal", "-shm"):
                Path(f"{journal}{suffix}").unlink(missing_ok=True)
        elif journal is not None:
            _finish(journal.close())

    def journal(self) -> MemoryJournal | Path:
        """The running test's journal, made on first use."""
        if self._journal is None:
            if self.journal_kind == "memory":
                self._journal = MemoryJournal()
            else:
                self._journal = self.base / f"journal-{self._tests}.db"
        return self._journal

    def wrapper_for(self, session: Any) -> ReconcilingSession | None:
        """The test's wrapper around ``session``; None when the wrapper refuses it."""
        known = self._wrappers.get(id(session))
        if known is not None:
            return known[1]
        try:
            wrapper = ReconcilingSession(session, config=ReconcileConfig(journal=self.journal()))
        except UnsupportedSession:
            self.counts.refused[type(session).__name__] += 1
            return None
        # The session is kept alive with its wrapper, so its id stays its own for the test.
        self._wrappers[id(session)] = (session, wrapper)
        self.counts.wrappers += 1
        return wrapper

    def prepare(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The runner's keyword arguments, with the session wrapped and the gate composed."""
        session = kwargs.get("session")
        if session is None:
            return kwargs
        self.counts.runs += 1
        if isinstance(session, ReconcilingSession):
            self.counts.given_wrapped += 1
            return kwargs
        if not self.wrap:
            return kwargs
        wrapper = self.wrapper_for(session)
        if wrapper is None:
            return kwargs
        self.counts.wrapped += 1
        prepared = dict(kwargs)
        prepared["session"] = wrapper
        if self.compose == "installed":
            # What the runner agents_reconcile.install() puts in front of the SDK's does.
            composed: dict[str, Any] = ReconcilingRunner(None).gated(prepared)
            return composed
        prepared["run_config"] = composed_config(wrapper, kwargs.get("run_config"))
        hooks = kwargs.get("hooks")
        if hooks is None or isinstance(hooks, RunHooksBase):
            prepared["hooks"] = wrapper.hooks(hooks)
        return prepared


def composed_config(wrapper: ReconcilingSession, given: Any) -> Any:
    """``given`` with the wrapper's gate composed in: ``wrapper.run_config(given)`` for a
    ``RunConfig``; no config, or a mapping, stays a mapping holding only its own keys plus the
    gate's (to the SDK a run given no model provider owns and closes the one it makes), as the
    installed runner composes it (``agents_reconcile._session.default_runner.gated_config``)."""
    return gated_config(wrapper, given)


def _finish(coroutine: Coroutine[Any, Any, Any]) -> None:
    """Run a coroutine that completes without suspending (a journal's close), outside any
    event loop; one that would suspend is abandoned."""
    try:
        coroutine.send(None)
    except StopIteration:
        return
    coroutine.close()


def _patched(state: Wrapping) -> dict[str, Any]:
    """New ``AgentRunner`` entry points routing ``session=`` through ``state``; returns the
    originals, to put back."""
    originals: dict[str, Any] = {name: AgentRunner.__dict__[name] for name in _ENTRY_POINTS}
    original_run = originals["run"]
    original_streamed = originals["run_streamed"]
    original_sync = originals["run_sync"]

    @functools.wraps(original_run)
    async def run(self: Any, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        return await original_run(self, starting_agent, input, **state.prepare(kwargs))

    @functools.wraps(original_streamed)
    def run_streamed(self: Any, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        return original_streamed(self, starting_agent, input, **state.prepare(kwargs))

    @functools.wraps(original_sync)
    def run_sync(self: Any, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        # The SDK's run_sync calls self.run with the wrapper, which passes it on unchanged.
        return original_sync(self, starting_agent, input, **state.prepare(kwargs))

    for name, function in (("run", run), ("run_streamed", run_streamed), ("run_sync", run_sync)):
        setattr(AgentRunner, name, function)
    return originals


class WarningCounter(logging.Handler):
    """Keeps the wrapper's warnings (first lines, cut short) in the running test's counts."""

    def __init__(self, state: Wrapping) -> None:
        super().__init__(level=logging.WARNING)
        self.state = state

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        first = message.splitlines()[0] if message else ""
        self.state.counts.warnings.append(first[:300])


# -- loopback only -----------------------------------------------------------------------------


def is_local(host: object) -> bool:
    """Whether ``host`` (a name or an address) is this machine."""
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").split("%", 1)[0].lower()
    if name in _LOCAL_NAMES or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


class LoopbackOnly:
    """Refuses connections, datagrams and name lookups beyond loopback, counting each."""

    def __init__(self, on_blocked: Callable[[str], None]) -> None:
        self._on_blocked = on_blocked
        self._saved: list[tuple[Any, str, Any]] = []

    def _refuse(self, destination: str) -> OSError:
        self._on_blocked(destination)
        return ConnectionRefusedError(
            f"the SDK compatibility run reaches loopback only, not {destination}"
        )

    def _check(self, address: object) -> None:
        if isinstance(address, tuple) and address and not is_local(address[0]):
            raise self._refuse(f"{address[0]}:{address[1] if len(address) > 1 else ''}")

    def install(self) -> None:
        guard = self
        sock = socket.socket
        original_connect = sock.connect
        original_connect_ex = sock.connect_ex
        original_sendto = sock.sendto
        original_getaddrinfo = socket.getaddrinfo

        def connect(self: socket.socket, address: Any) -> None:
            guard._check(address)
            original_connect(self, address)

        def connect_ex(self: socket.socket, address: Any) -> int:
            guard._check(address)
            return original_connect_ex(self, address)

        def sendto(self: socket.socket, data: Any, *args: Any) -> int:
            guard._check(args[-1] if args else None)
            return original_sendto(self, data, *args)

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            if not is_local(host) and not _numeric(host):
                raise socket.gaierror(socket.EAI_NONAME, str(guard._refuse(str(host))))
            return original_getaddrinfo(host, *args, **kwargs)

        for owner, name, value in (
            (sock, "connect", connect),
            (sock, "connect_ex", connect_ex),
            (sock, "sendto", sendto),
            (socket, "getaddrinfo", getaddrinfo),
        ):
            self._saved.append((owner, name, owner.__dict__.get(name)))
            setattr(owner, name, value)

    def uninstall(self) -> None:
        for owner, name, value in reversed(self._saved):
            if value is None:
                delattr(owner, name)
            else:
                setattr(owner, name, value)
        self._saved.clear()


def _numeric(host: object) -> bool:
    """A numeric address resolves without asking anyone (the connect is checked instead)."""
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


# -- outcomes ----------------------------------------------------------------------------------


class Outcomes:
    """Every test's outcome, from its reports (in the process that receives them all)."""

    def __init__(self) -> None:
        self.phases: dict[str, dict[str, pytest.TestReport]] = {}
        self.collection_errors: dict[str, str] = {}

    def add(self, report: pytest.TestReport) -> None:
        self.phases.setdefault(report.nodeid, {})[report.when or "call"] = report

    def add_collection(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors[report.nodeid] = _message(report)

    def results(self) -> dict[str, dict[str, Any]]:
        return {nodeid: _result(phases) for nodeid, phases in self.phases.items()}


def _result(phases: dict[str, pytest.TestReport]) -> dict[str, Any]:
    setup, call, teardown = (phases.get(when) for when in ("setup", "call", "teardown"))
    outcome = "passed"
    failing: pytest.TestReport | None = None
    if setup is not None and setup.failed:
        outcome, failing = "error", setup
    elif call is not None and call.failed:
        outcome, failing = "failed", call
    elif teardown is not None and teardown.failed:
        outcome, failing = "error", teardown
    else:
        finished = call if call is not None else setup
        if finished is not None and finished.skipped:
            outcome = "xfailed" if hasattr(finished, "wasxfail") else "skipped"
        elif call is not None and hasattr(call, "wasxfail"):
            outcome = "xpassed"
        elif call is None:
            outcome = "error"
    counts: dict[str, Any] = {}
    for report in phases.values():
        for name, value in report.user_properties:
            if name == PROPERTY and isinstance(value, str):
                counts = json.loads(value)
    result: dict[str, Any] = {
        "outcome": outcome,
        "duration": round(sum(r.duration for r in phases.values()), 3),
        "counts": counts,
    }
    if failing is not None:
        result["when"] = failing.when
        result["message"] = _message(failing)
        text = failing.longreprtext
        result["detail"] = text[-_DETAIL_CHARS:]
    return result


def _message(report: pytest.TestReport | pytest.CollectReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if isinstance(message, str) and message:
        return message
    lines = [line for line in str(report.longrepr).splitlines() if line.strip()]
    return lines[-1] if lines else ""


# -- pytest hooks ------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sdk-compat", "agents-reconcile: SDK compatibility")
    group.addoption(
        "--sdk-compat-wrap",
        action="store_true",
        help="wrap every session the runner is given in a ReconcilingSession",
    )
    group.addoption(
        "--sdk-compat-journal",
        choices=("sqlite", "memory"),
        default="sqlite",
        help="each test's journal: a fresh SQLite file (default) or a MemoryJournal",
    )
    group.addoption(
        "--sdk-compat-compose",
        choices=("by-hand", "installed"),
        default="by-hand",
        help="compose the gate as session.run_config()/hooks() do by hand, or as the runner"
        " agents_reconcile.install() puts in place does",
    )
    group.addoption("--sdk-compat-results", default=None, help="write outcomes as JSON here")
    group.addoption("--sdk-compat-only", default=None, help="run only the node ids in this file")


_STATE_KEY: Final = pytest.StashKey[Wrapping]()
_UNDO_KEY: Final = pytest.StashKey[Callable[[], None]]()


def pytest_configure(config: pytest.Config) -> None:
    base = Path(tempfile.mkdtemp(prefix="sdk-compat-journals-"))
    state = Wrapping(
        wrap=bool(config.getoption("sdk_compat_wrap")),
        journal=str(config.getoption("sdk_compat_journal")),
        base=base,
        compose=str(config.getoption("sdk_compat_compose")),
    )
    config.stash[_STATE_KEY] = state
    originals = _patched(state)
    guard = LoopbackOnly(lambda destination: state.counts.blocked.append(destination))
    guard.install()
    counter = WarningCounter(state)
    logging.getLogger("agents_reconcile").addHandler(counter)
    path = config.getoption("sdk_compat_results")
    if path and not hasattr(config, "workerinput"):
        # The process that receives every test's reports (xdist's controller, or the only one).
        config.pluginmanager.register(Recorder(config, Path(path)), "sdk-compat-recorder")

    def undo() -> None:
        logging.getLogger("agents_reconcile").removeHandler(counter)
        guard.uninstall()
        for name, function in originals.items():
            setattr(AgentRunner, name, function)
        shutil.rmtree(base, ignore_errors=True)

    config.stash[_UNDO_KEY] = undo


def pytest_unconfigure(config: pytest.Config) -> None:
    undo = config.stash.get(_UNDO_KEY, None)
    if undo is not None:
        undo()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    only = config.getoption("sdk_compat_only")
    if not only:
        return
    wanted = {line.strip() for line in Path(only).read_text().splitlines() if line.strip()}
    kept = [item for item in items if item.nodeid in wanted]
    dropped = [item for item in items if item.nodeid not in wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    state = item.config.stash[_STATE_KEY]
    state.begin_test()
    try:
        return (yield)
    finally:
        state.end_test()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    if call.when == "teardown":
        counts = item.config.stash[_STATE_KEY].counts
        item.user_properties.append((PROPERTY, counts.as_json()))


class Recorder:
    """Collects every report and writes the outcomes when the session ends."""

    def __init__(self, config: pytest.Config, path: Path) -> None:
        self.config = config
        self.path = path
        self.outcomes = Outcomes()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.outcomes.add(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self.outcomes.add_collection(report)

    def pytest_sessionfinish(self, exitstatus: int) -> None:
        payload = {
            "exitstatus": int(exitstatus),
            "wrapped": bool(self.config.getoption("sdk_compat_wrap")),
            "journal": self.config.getoption("sdk_compat_journal"),
            "compose": self.config.getoption("sdk_compat_compose"),
            "tests": self.outcomes.results(),
            "collection_errors": self.outcomes.collection_errors,
        }
        self.path.write_text(json.dumps(payload, indent=1, sort_keys=True))
