"""What every check shares: the contracts' registry, how one is run, and what it reports."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NoReturn, TypeVar

__all__ = [
    "CONTRACTS",
    "KINDS",
    "Contract",
    "ContractSkipped",
    "ContractViolation",
    "Report",
    "Result",
    "Subject",
    "contract",
    "contracts",
    "fail",
    "refused",
    "require",
    "skip",
]

_T = TypeVar("_T")

KINDS: Final = (
    "journal",
    "effects",
    "aside",
    "pages",
    "retention",
    "sealing",
    "store",
    "session",
)
"""The kinds of contract: an ``IntentJournal``'s, an effects component's (``JournalEffects``,
``journal.effects``), an aside
component's (``JournalAside``, ``journal.aside``), a pages component's (``JournalPages``,
``journal.pages``), a retention component's (``JournalRetention``, ``journal.retention``), a
sealing component's (``JournalSealing``, ``journal.sealing``), a revisioned store's, and a
plain SDK ``Session``'s."""


class ContractViolation(AssertionError):
    """A backend broke a contract: ``contract`` names it, ``problem`` says what was seen, and
    ``statement`` is the contract as one sentence."""

    def __init__(self, contract: str, problem: str, *, statement: str = "") -> None:
        self.contract = contract
        self.problem = problem
        self.statement = statement
        text = f"contract {contract!r} broken: {problem}"
        if statement:
            text += f"\n  the contract: {statement}"
        super().__init__(text)


class ContractSkipped(Exception):
    """A check that does not apply to this backend (it lacks the capability), with the reason."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class _Broken(Exception):
    """Raised inside a check; the runner names the contract (``ContractViolation``)."""


def require(condition: object, problem: str) -> None:
    """Go on if ``condition`` holds; else the running check fails, saying ``problem``."""
    if not condition:
        raise _Broken(problem)


def fail(problem: str) -> NoReturn:
    """The running check fails, saying ``problem``."""
    raise _Broken(problem)


def skip(reason: str) -> NoReturn:
    """The running check does not apply, for ``reason``."""
    raise ContractSkipped(reason)


async def maybe_await(value: _T | Awaitable[_T]) -> _T:
    """``value``, awaited when it is awaitable (factories may be plain functions)."""
    if inspect.isawaitable(value):
        found: _T = await value
        return found
    return value


class Subject:
    """What one check runs against: the user's factories and hooks, and every object they
    made for it, closed when the check ends. ``hooks`` holds the kind's factories by name
    (``journal``, ``another``, ``newer_schema``, ``store``, ``session``); one that was not
    given skips the checks that need it, or is done without. ``check_journal``,
    ``check_store`` and ``check_session`` build one per contract from their arguments; to run
    one contract yourself, build one for it (a store's: ``store`` and ``session`` both the
    store's factory): ``await contract.run(Subject(journal=make_journal))``."""

    def __init__(self, **hooks: Callable[..., Any] | None) -> None:
        self._hooks = {name: hook for name, hook in hooks.items() if hook is not None}
        self.opened: list[Any] = []

    def offers(self, name: str) -> bool:
        """Whether hook ``name`` was given."""
        return name in self._hooks

    async def make(self, name: str, *args: Any) -> Any:
        """What hook ``name`` makes of ``args``, kept to be closed; ``ContractSkipped`` when
        it was not given."""
        hook = self._hooks.get(name)
        if hook is None:
            skip(f"no {name!r} hook was given")
        made = await maybe_await(hook(*args))
        if made is not None and all(made is not seen for seen in self.opened):
            self.opened.append(made)
        return made

    async def close(self) -> None:
        """Close what was made (newest first), where it can be closed."""
        problems: list[BaseException] = []
        for thing in reversed(self.opened):
            closer = getattr(thing, "close", None)
            if not callable(closer):
                continue
            try:
                await maybe_await(closer())
            except Exception as exc:
                problems.append(exc)
        self.opened.clear()
        if problems:
            raise problems[0]


Check = Callable[[Subject], Awaitable[None]]


@dataclass(frozen=True)
class Contract:
    """One contract: its ``name`` (a sentence in snake case), its ``kind`` (``KINDS``), the
    contract as one sentence (``statement``, the check's docstring), and the check."""

    name: str
    kind: str
    statement: str
    check: Callable[[Subject], Awaitable[None]] = field(repr=False, compare=False)
    """The check: a coroutine function run on a ``Subject`` (``run`` runs it)."""
    last: bool = False
    """Run after the others: its check may leave the storage unusable (a newer schema)."""

    async def run(self, subject: Subject) -> None:
        """Run the check on ``subject`` (closing what it made): ``ContractViolation`` naming
        this contract when the backend breaks it, ``ContractSkipped`` when it does not apply,
        else nothing. Any other exception the backend raises breaks the contract too."""
        __tracebackhide__ = True  # pytest shows the violation, not this frame
        failure: BaseException | None = None
        try:
            await self.check(subject)
        except BaseException as exc:
            failure = exc
        try:
            await subject.close()
        except Exception as exc:
            # Closing is part of the contract too, unless something failed already.
            failure = failure or exc
        if failure is None:
            return
        if isinstance(failure, _Broken):
            raise ContractViolation(self.name, str(failure), statement=self.statement) from None
        if isinstance(failure, ContractSkipped) or not isinstance(failure, Exception):
            raise failure
        raise ContractViolation(
            self.name, f"raised {type(failure).__name__}: {failure}", statement=self.statement
        ) from failure


CONTRACTS: Final[dict[str, Contract]] = {}
"""Every contract by name, in the order they are declared."""


def contract(kind: str, *, last: bool = False) -> Callable[[Check], Check]:
    """Register the decorated check as a contract of ``kind``, named after the function, its
    docstring the statement; ``last``: run after every other contract."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of contract {kind!r}")

    def register(check: Check) -> Check:
        name = check.__name__
        statement = " ".join((check.__doc__ or "").split())
        if not statement:
            raise ValueError(f"contract {name} needs a docstring stating it")
        if name in CONTRACTS:
            raise ValueError(f"contract {name} is declared twice")
        CONTRACTS[name] = Contract(name, kind, statement, check, last)
        return check

    return register


def contracts(*kinds: str) -> list[Contract]:
    """The contracts of ``kinds`` (every contract when none is named), kind by kind in the order
    named, each kind's in declared order, those that must run last at the end."""
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        raise ValueError(f"unknown kind of contract {unknown[0]!r}; known: {', '.join(KINDS)}")
    chosen = [
        found for kind in (kinds or KINDS) for found in CONTRACTS.values() if found.kind == kind
    ]
    return sorted(chosen, key=lambda found: found.last)


@dataclass(frozen=True)
class Result:
    """How one contract went: ``passed``, ``failed`` (with the ``violation``) or ``skipped``
    (``detail`` says why)."""

    contract: Contract
    status: Literal["passed", "failed", "skipped"]
    detail: str = ""
    violation: ContractViolation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Report:
    """The results of a run of contracts, in declared order."""

    results: tuple[Result, ...]

    @property
    def passed(self) -> list[Result]:
        return [result for result in self.results if result.status == "passed"]

    @property
    def failed(self) -> list[Result]:
        return [result for result in self.results if result.status == "failed"]

    @property
    def skipped(self) -> list[Result]:
        return [result for result in self.results if result.status == "skipped"]

    @property
    def ok(self) -> bool:
        """Whether no contract was broken (skipped ones do not count against it)."""
        return not self.failed

    def status(self, name: str) -> Literal["passed", "failed", "skipped"]:
        """How the contract ``name`` went."""
        for result in self.results:
            if result.contract.name == name:
                return result.status
        raise KeyError(f"contract {name!r} was not run")

    def raise_for_violations(self) -> None:
        """Raise the first ``ContractViolation`` (the others are in ``failed``)."""
        for result in self.failed:
            assert result.violation is not None
            raise result.violation

    def __str__(self) -> str:
        width = max((len(result.contract.name) for result in self.results), default=0)
        lines = [
            (
                f"{result.status:7}  {result.contract.name:{width}}"
                + (f"  {result.detail}" if result.detail else "")
            ).rstrip()
            for result in self.results
        ]
        lines.append(
            f"{len(self.passed)} passed, {len(self.failed)} failed, {len(self.skipped)} skipped"
        )
        return "\n".join(lines)


async def run_all(
    chosen: Iterable[Contract], subject: Callable[[], Subject], only: Iterable[str] | None
) -> Report:
    """Run each contract of ``chosen`` (those named in ``only``, when given) on a new subject."""
    wanted = None if only is None else set(only)
    if wanted is not None:
        unknown = wanted - set(CONTRACTS)
        if unknown:
            raise ValueError(f"unknown contract {sorted(unknown)[0]!r}")
    results: list[Result] = []
    for each in chosen:
        if wanted is not None and each.name not in wanted:
            continue
        try:
            await each.run(subject())
        except ContractSkipped as skipped:
            results.append(Result(each, "skipped", skipped.reason))
        except ContractViolation as violation:
            results.append(Result(each, "failed", violation.problem, violation))
        else:
            results.append(Result(each, "passed"))
    return Report(tuple(results))


async def refused(
    kinds: type[BaseException] | tuple[type[BaseException], ...],
    call: Awaitable[Any],
    what: str,
) -> BaseException:
    """Await ``call``, which must raise one of ``kinds``: the exception; else the running
    check fails, saying what ``what`` did instead."""
    wanted = kinds if isinstance(kinds, tuple) else (kinds,)
    names = " or ".join(kind.__name__ for kind in wanted)
    try:
        await call
    except wanted as exc:
        return exc
    except Exception as exc:
        fail(f"{what} raised {type(exc).__name__} ({exc}), not {names}")
    fail(f"{what} was not refused (it should raise {names})")
