"""Run the Agents SDK's own session tests as they ship, then with every session wrapped.

    python -m compat.sdk_tests [--sdk-version X ...] [--cache DIR] [--files PATH ...]

For each SDK version (the installed one by default; ``oldest`` and ``newest`` name the ends of
the range this project declares, ``middle`` the release half way through it) it fetches the
version's source distribution from the package index, builds a virtual environment for it under
the cache (the SDK from that source, with the extras and test dependencies the selected tests
need, and this project), runs the selected test files once as they are and once through
``compat.wrap_sessions``, and compares. Every test
that passes unwrapped must pass wrapped, unless ``compat/reviewed.toml`` says why it may not.
Exit status: 0 when nothing unexpected fails, 1 when something does, 2 when a pass could not run.

The wrapped pass reruns only the tests that passed unwrapped and handed the runner a session
(the plugin changes nothing else); ``--wrap-all`` reruns every selected test.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

from .compare import Comparison, Reviewed, compare, exercised, grouped

__all__ = ["main"]

ROOT: Final = Path(__file__).resolve().parent.parent
"""The project's root: the directory holding ``compat/`` and ``pyproject.toml``."""
DISTRIBUTION: Final = "openai-agents"

TEST_REQUIREMENTS: Final = (
    "pytest==9.0.3",
    "pytest-asyncio==1.4.0",
    "pytest-xdist==3.8.0",
    "fakeredis==2.31.3",
    "aiosqlite==0.21.0",
    "httpx==0.28.1",
)
"""The test dependencies the selected files import (pinned here, and only here)."""
SDK_EXTRAS: Final = ("sqlalchemy", "encrypt", "redis", "dapr")
"""The SDK's extras the selected session tests use (the Dapr tests use a fake client)."""

SESSION_DIRECTORIES: Final = (
    "tests/memory",
    "tests/extensions/memory",
    "tests/deferred_session_writes",
)
ALWAYS: Final = ("tests/test_hitl_session_scenario.py", "tests/test_run_impl_resume_paths.py")
"""Selected whenever present, besides the files found to pass ``session=`` to a run."""
RUN_METHODS: Final = frozenset({"run", "run_streamed", "run_sync"})
LEFT_OUT: Final = {
    "tests/extensions/memory/test_advanced_sqlite_session.py::"
    "test_branch_allocation_is_serialized_across_processes": "multi-process store test",
    "tests/extensions/memory/test_advanced_sqlite_session.py::"
    "test_pop_item_claim_is_unique_across_processes": "multi-process store test",
    "tests/extensions/memory/test_advanced_sqlite_session.py::"
    "test_concurrent_structure_table_claims_leave_one_coherent_owner": "multi-process store test",
}
"""Node id prefixes deselected in both passes: each spawns processes that contend for one
SQLite file for about 15 s and never runs an agent, so wrapping cannot change it."""
ENVIRONMENT_SWITCHES: Final = ("AGENTS_RECONCILE", "AGENTS_RECONCILE_INSTALL")
"""Left out of the test environment: both passes run the wrapper as configured by the plugin."""
_MARKER: Final = "sdk-compat.json"
_BUILDING: Final = ".sdk-compat-building"


# -- versions ------------------------------------------------------------------------------------


def declared_range(root: Path = ROOT) -> str:
    """The SDK version range the project's ``pyproject.toml`` declares (``>=0.24.0,<0.25``)."""
    data = tomllib.loads((root / "pyproject.toml").read_text())
    for requirement in data["project"]["dependencies"]:
        match = re.match(r"\s*openai[-_.]agents\s*([^;\s]*)", requirement, re.IGNORECASE)
        if match:
            return match.group(1)
    raise SystemExit(f"{root / 'pyproject.toml'} declares no {DISTRIBUTION} dependency")


def _release(version: str) -> tuple[int, ...] | None:
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        return None  # pre-releases and other forms are never chosen by a range here
    return tuple(int(part) for part in version.split("."))


def _padded(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)), b + (0,) * (width - len(b))


def in_range(version: str, specifier: str) -> bool:
    """Whether a release ``version`` satisfies a comma-separated specifier of
    ``>=``, ``>``, ``<=``, ``<``, ``==``, ``!=`` clauses."""
    release = _release(version)
    if release is None:
        return False
    for clause in filter(None, (part.strip() for part in specifier.split(","))):
        match = re.fullmatch(r"(>=|<=|==|!=|>|<)\s*([\d.]+)", clause)
        if match is None:
            raise SystemExit(f"cannot read the version clause {clause!r}")
        operator, bound = match.groups()
        left, right = _padded(release, _release(bound) or ())
        holds = {
            ">=": left >= right,
            "<=": left <= right,
            ">": left > right,
            "<": left < right,
            "==": left == right,
            "!=": left != right,
        }[operator]
        if not holds:
            return False
    return True


def available_versions(python: str) -> list[str]:
    """Every release of the SDK the package index offers, oldest first."""
    output = _capture([python, "-m", "pip", "index", "versions", DISTRIBUTION])
    for line in output.splitlines():
        if line.strip().startswith("Available versions:"):
            found = [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
            releases = [v for v in found if _release(v) is not None]
            return sorted(releases, key=lambda v: _release(v) or ())
    raise SystemExit(f"the package index listed no versions of {DISTRIBUTION}:\n{output}")


def resolve_versions(requested: Sequence[str], python: str) -> list[str]:
    """Versions to test: ``installed`` (the default), ``oldest``, ``middle`` (the release half
    way through the declared range), ``newest``, ``range`` (every release in it) or a version
    number."""
    wanted = list(requested) or ["installed"]
    listed: list[str] | None = None
    resolved: list[str] = []
    for name in wanted:
        if name == "installed":
            try:
                found = [importlib.metadata.version(DISTRIBUTION)]
            except importlib.metadata.PackageNotFoundError:
                raise SystemExit(
                    f"{DISTRIBUTION} is not installed here: pass --sdk-version"
                ) from None
        elif name in ("oldest", "middle", "newest", "range"):
            if listed is None:
                specifier = declared_range()
                listed = [v for v in available_versions(python) if in_range(v, specifier)]
                if not listed:
                    raise SystemExit(f"no release of {DISTRIBUTION} satisfies {specifier}")
            found = {
                "oldest": listed[:1],
                "middle": [listed[len(listed) // 2]],
                "newest": listed[-1:],
                "range": listed,
            }[name]
        else:
            found = [name]
        resolved.extend(v for v in found if v not in resolved)
    return resolved


# -- the environment of one SDK version -----------------------------------------------------------


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return _normalized(match.group(1)) if match else ""


def project_dependencies(root: Path = ROOT) -> list[str]:
    """This project's runtime dependencies other than the SDK (installed beside it, so that the
    project itself goes in without touching the SDK version under test)."""
    data = tomllib.loads((root / "pyproject.toml").read_text())
    return [
        requirement
        for requirement in data["project"]["dependencies"]
        if _requirement_name(requirement) != DISTRIBUTION
    ]


def lock_constraints(tree: Path, skip: Iterable[str]) -> list[str]:
    """``name==version`` for each package the SDK's own lock file pins to one version, except
    ``skip`` (what this command pins itself) and the SDK: the versions its tests were run
    with, so that a test that fails unwrapped is rare and every other one can be compared."""
    lock = tree / "uv.lock"
    if not lock.is_file():
        return []
    packages = tomllib.loads(lock.read_text()).get("package", [])
    versions: dict[str, set[str]] = {}
    for package in packages:
        if "name" in package and "version" in package:
            versions.setdefault(_normalized(package["name"]), set()).add(str(package["version"]))
    excluded = {_normalized(name) for name in skip} | {DISTRIBUTION}
    return sorted(
        f"{name}=={next(iter(found))}"
        for name, found in versions.items()
        if len(found) == 1 and name not in excluded
    )


@dataclasses.dataclass
class Environment:
    """The cache of one SDK version: its source, its virtual environment, its results."""

    version: str
    cache: Path
    python: str
    use_lock: bool

    @property
    def home(self) -> Path:
        return self.cache / f"{DISTRIBUTION}-{self.version}"

    @property
    def venv(self) -> Path:
        return self.home / "venv"

    @property
    def venv_python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def results(self) -> Path:
        return self.home / "results"

    @property
    def tree(self) -> Path:
        """The extracted source distribution (its ``tests/`` run in place)."""
        return self.home / "source"

    def prepare(self, log: Path) -> None:
        """Fetch, extract and install what is missing; reuse what is there and current."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.results.mkdir(exist_ok=True)
        archive = self.fetch(log)
        if not (self.tree / "tests").is_dir():
            self.extract(archive)
        self.install(log)

    def fetch(self, log: Path) -> Path:
        sdists = self.cache / "sdists"
        found = self._archive(sdists)
        if found is not None:
            return found
        sdists.mkdir(parents=True, exist_ok=True)
        _say(f"  fetching the {DISTRIBUTION} {self.version} source distribution")
        _run(
            [
                self.python,
                "-m",
                "pip",
                "download",
                f"{DISTRIBUTION}=={self.version}",
                "--no-binary",
                ":all:",
                "--no-deps",
                "--quiet",
                "-d",
                str(sdists),
            ],
            log,
        )
        found = self._archive(sdists)
        if found is None:
            raise SystemExit(f"no source distribution of {DISTRIBUTION} {self.version} arrived")
        return found

    def _archive(self, sdists: Path) -> Path | None:
        for stem in ("openai_agents", "openai-agents"):
            candidate = sdists / f"{stem}-{self.version}.tar.gz"
            if candidate.is_file():
                return candidate
        return None

    def extract(self, archive: Path) -> None:
        staging = Path(tempfile.mkdtemp(prefix="extract-", dir=self.home))
        try:
            with tarfile.open(archive) as bundle:
                bundle.extractall(staging, filter="data")
            tops = [p for p in staging.iterdir() if p.is_dir()]
            if len(tops) != 1 or not (tops[0] / "tests").is_dir():
                raise SystemExit(f"{archive.name} has no tests/ directory to run")
            if self.tree.exists():
                shutil.rmtree(self.tree)  # a partial extraction of ours (no tests/ in it)
            tops[0].rename(self.tree)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def wanted(self) -> dict[str, Any]:
        """What the environment must hold; a change rebuilds it."""
        pins = list(TEST_REQUIREMENTS)
        project = project_dependencies()
        skip = [_requirement_name(r) for r in (*pins, *project)]
        constraints = lock_constraints(self.tree, skip) if self.use_lock else []
        return {
            "sdk": self.version,
            "extras": list(SDK_EXTRAS),
            "requirements": pins,
            "project": str(ROOT),
            "project_dependencies": project,
            "constraints": hashlib.sha256("\n".join(constraints).encode()).hexdigest(),
            "python": self.python,
            "_constraints": constraints,
        }

    def install(self, log: Path) -> None:
        wanted = self.wanted()
        constraints: list[str] = wanted.pop("_constraints")
        marker = self.venv / _MARKER
        if marker.is_file() and json.loads(marker.read_text()) == wanted:
            return
        if self.venv.exists():
            if not (marker.is_file() or (self.venv / _BUILDING).exists()):
                raise SystemExit(f"{self.venv} exists and was not built by this command")
            shutil.rmtree(self.venv)
        _say(f"  building the virtual environment for {DISTRIBUTION} {self.version}")
        _run([self.python, "-m", "venv", str(self.venv)], log)
        (self.venv / _BUILDING).touch()
        python = str(self.venv_python)
        pip = [python, "-m", "pip", "install", "--quiet"]
        constraint_file = self.home / "constraints.txt"
        constraint_file.write_text("".join(f"{line}\n" for line in constraints))
        _run(
            [
                *pip,
                "-c",
                str(constraint_file),
                "-e",
                f"{self.tree}[{','.join(SDK_EXTRAS)}]",
                *TEST_REQUIREMENTS,
                *wanted["project_dependencies"],
            ],
            log,
        )
        # The project goes in without its dependencies: the SDK under test stays as it is,
        # even when its version is outside the range the project declares.
        _run([*pip, "--no-deps", "-e", str(ROOT)], log)
        installed = _capture(
            [python, "-c", f"import importlib.metadata as m; print(m.version({DISTRIBUTION!r}))"]
        ).strip()
        if installed != self.version:
            raise SystemExit(
                f"the environment holds {DISTRIBUTION} {installed}, not {self.version}"
            )
        marker.write_text(json.dumps(wanted, indent=1, sort_keys=True))
        (self.venv / _BUILDING).unlink()


# -- selection ----------------------------------------------------------------------------------


def _passes_session(path: Path) -> bool:
    """Whether a test file calls ``run``, ``run_streamed`` or ``run_sync`` with ``session=``
    (anything but a literal None)."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except (SyntaxError, UnicodeDecodeError):
        return False
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in RUN_METHODS
        ):
            for keyword in node.keywords:
                value = keyword.value
                if keyword.arg == "session" and not (
                    isinstance(value, ast.Constant) and value.value is None
                ):
                    return True
    return False


def default_selection(tree: Path) -> list[str]:
    """The session test directories, the files named in ``ALWAYS``, and every other test
    file that passes ``session=`` to a run (paths relative to the source tree)."""
    chosen: list[str] = [d for d in SESSION_DIRECTORIES if (tree / d).is_dir()]
    chosen += [f for f in ALWAYS if (tree / f).is_file()]
    for path in sorted((tree / "tests").rglob("test_*.py")):
        relative = path.relative_to(tree).as_posix()
        if any(relative == c or relative.startswith(f"{c}/") for c in chosen):
            continue
        if _passes_session(path):
            chosen.append(relative)
    return chosen


# -- running -----------------------------------------------------------------------------------


def _say(text: str) -> None:
    print(text, flush=True)


def _run(command: Sequence[str], log: Path, *, cwd: Path | None = None) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{tail}")


def _capture(command: Sequence[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr}")
    return done.stdout


def _test_environment() -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_SWITCHES}
    environment.pop("PYTHONPATH", None)
    return environment


@dataclasses.dataclass
class Pass:
    """One pytest run over the selection."""

    name: str
    seconds: float
    results: dict[str, Any]
    last_line: str
    reused: bool = False


def run_pass(
    env: Environment,
    name: str,
    files: Sequence[str],
    *,
    plugin: Sequence[str],
    jobs: int,
    only: Sequence[str] | None = None,
    extra: Sequence[str] = (),
    reuse: bool = False,
) -> Pass:
    """Run one pass; ``plugin``: the options given to ``compat.wrap_sessions``. ``reuse``: take
    the results of an earlier identical run, if any (the key covers the environment, the
    selection, the arguments and this package's source)."""
    results = env.results / f"{name}.json"
    log = env.results / f"{name}.log"
    stamp = env.results / f"{name}.key"
    key = _pass_key(env, files, plugin=plugin, only=only, extra=extra)
    if reuse and results.is_file() and stamp.is_file() and stamp.read_text() == key:
        data: dict[str, Any] = json.loads(results.read_text())
        return Pass(
            name=name,
            seconds=float(data.get("seconds", 0.0)),
            results=data,
            last_line=str(data.get("last_line", "")),
            reused=True,
        )
    stamp.unlink(missing_ok=True)
    results.unlink(missing_ok=True)
    command = [
        str(env.venv_python),
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "compat.wrap_sessions",
        *plugin,
        f"--sdk-compat-results={results}",
        f"--junitxml={env.results / f'{name}.xml'}",
        "-o",
        "junit_family=xunit2",
    ]
    if only is not None:
        listing = env.results / f"{name}.only"
        listing.write_text("".join(f"{nodeid}\n" for nodeid in only))
        command.append(f"--sdk-compat-only={listing}")
    if jobs > 1:
        command += ["-n", str(jobs), "--dist", "worksteal"]
    for prefix in LEFT_OUT:
        command.append(f"--deselect={prefix}")
    command += [*extra, *files]
    started = time.monotonic()
    with log.open("w") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        subprocess.run(
            command,
            cwd=env.tree,
            env=_test_environment(),
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    seconds = time.monotonic() - started
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if not results.is_file():
        tail = "\n".join(lines[-40:])
        raise PassFailed(f"the {name} pass produced no results (log: {log}):\n{tail}")
    data = json.loads(results.read_text())
    data["seconds"] = round(seconds, 1)
    data["last_line"] = last
    results.write_text(json.dumps(data, indent=1, sort_keys=True))
    stamp.write_text(key)
    return Pass(name=name, seconds=seconds, results=data, last_line=last)


def _pass_key(
    env: Environment,
    files: Sequence[str],
    *,
    plugin: Sequence[str],
    only: Sequence[str] | None,
    extra: Sequence[str],
) -> str:
    digest = hashlib.sha256()
    marker = env.venv / _MARKER
    digest.update(marker.read_bytes() if marker.is_file() else b"")
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.read_bytes())
    chosen = None if only is None else list(only)
    settings = [list(files), list(plugin), chosen, list(extra), sorted(LEFT_OUT)]
    digest.update(json.dumps(settings).encode())
    return digest.hexdigest()


class PassFailed(Exception):
    """A pytest pass ended without writing its results."""


def files_of(nodeids: Iterable[str]) -> list[str]:
    """The test files the node ids live in, in order."""
    seen: dict[str, None] = {}
    for nodeid in nodeids:
        seen.setdefault(nodeid.split("::", 1)[0], None)
    return list(seen)


# -- reporting ----------------------------------------------------------------------------------


def report(version: str, comparison: Comparison, passes: Sequence[Pass], how: str) -> None:
    summary = comparison.summary()
    _say(f"\n{DISTRIBUTION} {version}: the SDK's tests, unwrapped and wrapped ({how})")
    for item in passes:
        how = "reused from an identical earlier run" if item.reused else "ran"
        _say(f"  {item.name} pass: {item.seconds:.0f} s, {how} ({item.last_line.strip('= ')})")
    _say(f"  left out in both passes: {len(LEFT_OUT)} slow tests that never run an agent")
    labels = (
        ("selected", "selected tests"),
        ("passed_unwrapped", "passed unwrapped"),
        ("exercised_session", "handed the runner a session"),
        ("rerun_wrapped", "rerun wrapped"),
        ("passed_wrapped", "passed wrapped"),
        ("failing_wrapped_only", "failing wrapped only (unexpected)"),
        ("reviewed", "failing wrapped, reviewed"),
        ("not_exercised", "passed unwrapped, no session run (not rerun)"),
        ("baseline_not_passing", "not passing unwrapped (not compared)"),
        ("refused_by_wrapper", "tests whose session the wrapper refused"),
        ("blocked_network", "tests that tried the network (refused)"),
        ("warned_but_passed", "passed wrapped with a wrapper warning"),
        ("stale_reviews", "reviewed entries not needed"),
    )
    for key, label in labels:
        _say(f"  {label:<46} {summary[key]:>6}")
    refused: dict[str, int] = {}
    for row in comparison.rows:
        for kind, count in row.counts.get("refused", {}).items():
            refused[kind] = refused.get(kind, 0) + int(count)
    if refused:
        kinds = ", ".join(f"{kind} ({count} runs)" for kind, count in sorted(refused.items()))
        _say(f"  left unwrapped: {kinds}")
    for name, errors in comparison.collection_errors.items():
        for nodeid, message in errors.items():
            _say(f"  collection error ({name}): {nodeid}: {message}")
    for key in comparison.stale_reviews:
        _say(f"  reviewed, but not failing: {key}")
    unexpected = comparison.unexpected
    if unexpected:
        _say("\nfailing wrapped but passing unwrapped, by error:")
        for group, rows in grouped(unexpected).items():
            _say(f"  [{len(rows)}] {group}")
            more = " ".join(line.strip() for line in (rows[0].message or "").splitlines()[1:4])
            if more:
                _say(f"      e.g. {more[:240]}")
            for row in rows:
                _say(f"      {row.nodeid}")
    warned = [r for r in comparison.rows if r.wrapped == "passed" and r.counts.get("warnings")]
    if warned:
        _say("\npassed wrapped, but the wrapper warned (check they pass for the SDK's reason):")
        for row in warned:
            _say(f"  {row.nodeid}\n      {row.counts['warnings'][0]}")
    reviewed_rows = [row for row in comparison.rows if row.status == "reviewed"]
    if reviewed_rows:
        _say("\nreviewed differences:")
        for row in reviewed_rows:
            _say(f"  {row.nodeid}\n      {row.reason}")


# -- command ------------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m compat.sdk_tests",
        description="Run the Agents SDK's session tests unwrapped and wrapped, and compare.",
    )
    parser.add_argument(
        "--sdk-version",
        action="append",
        default=[],
        metavar="X",
        help="an SDK version, or installed (default), oldest, middle, newest, range; repeatable",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=ROOT / ".cache" / "sdk-compat",
        help="where sources, environments and results are kept (default: .cache/sdk-compat)",
    )
    parser.add_argument(
        "--files", nargs="+", default=None, help="test files or directories of the SDK's source"
    )
    parser.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers (1: none)")
    parser.add_argument(
        "--journal",
        choices=("sqlite", "memory"),
        default="sqlite",
        help="each wrapped test's journal: a fresh SQLite file (default) or a MemoryJournal",
    )
    parser.add_argument(
        "--compose",
        choices=("by-hand", "installed"),
        default="by-hand",
        help="compose the gate as session.run_config()/hooks() do by hand (default), or as"
        " the runner agents_reconcile.install() puts in place does",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the comparison here")
    parser.add_argument(
        "--reviewed",
        type=Path,
        default=ROOT / "compat" / "reviewed.toml",
        help="the reviewed differences (default: compat/reviewed.toml)",
    )
    parser.add_argument("--wrap-all", action="store_true", help="rerun every selected test wrapped")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="run the unwrapped pass even when an identical earlier one can be reused",
    )
    parser.add_argument(
        "--no-lock",
        action="store_true",
        help="resolve the SDK's dependencies afresh instead of at its lock file's versions",
    )
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter the environments are built on"
    )
    parser.add_argument(
        "--pytest-arg",
        action="append",
        default=[],
        help="one more pytest argument, e.g. --pytest-arg=-k --pytest-arg=limit; repeatable",
    )
    parser.add_argument(
        "--list-versions",
        action="store_true",
        help="list the SDK releases in the declared range and exit",
    )
    return parser.parse_args(argv)


def mark_cache(cache: Path) -> None:
    """Create the cache, keeping it out of version control when this command made it."""
    if cache.exists():
        return
    cache.mkdir(parents=True)
    (cache / ".gitignore").write_text("# made by python -m compat\n*\n")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.list_versions:
        specifier = declared_range()
        releases = [v for v in available_versions(args.python) if in_range(v, specifier)]
        _say(f"{DISTRIBUTION} {specifier}: {', '.join(releases) or '(none)'}")
        return 0
    reviewed = Reviewed.load(args.reviewed)
    cache: Path = args.cache.resolve()
    mark_cache(cache)
    versions = resolve_versions(args.sdk_version, args.python)
    wrapping = (
        "--sdk-compat-wrap",
        f"--sdk-compat-journal={args.journal}",
        f"--sdk-compat-compose={args.compose}",
    )
    status = 0
    everything: dict[str, Any] = {}
    for version in versions:
        _say(f"{DISTRIBUTION} {version}")
        env = Environment(version, cache, args.python, use_lock=not args.no_lock)
        started = time.monotonic()
        env.home.mkdir(parents=True, exist_ok=True)
        env.results.mkdir(exist_ok=True)
        setup_log = env.results / "setup.log"
        setup_log.write_text("")
        env.prepare(setup_log)
        files = list(args.files) if args.files else default_selection(env.tree)
        _say(f"  {len(files)} test files or directories selected")
        passes: list[Pass] = []
        try:
            first = run_pass(
                env,
                "unwrapped",
                files,
                plugin=(),
                jobs=args.jobs,
                extra=args.pytest_arg,
                reuse=not args.fresh,
            )
            passes.append(first)
            if args.wrap_all:
                only, wrapped_files = None, files
            else:
                only = exercised(first.results.get("tests", {}))
                wrapped_files = files_of(only)
            if only is None or only:
                second = run_pass(
                    env,
                    "wrapped",
                    wrapped_files,
                    plugin=wrapping,
                    jobs=args.jobs,
                    only=only,
                    extra=args.pytest_arg,
                )
                passes.append(second)
                wrapped_results = second.results
            else:
                wrapped_results = {"tests": {}}
        except PassFailed as failure:
            _say(str(failure))
            status = max(status, 2)
            continue
        comparison = compare(first.results, wrapped_results, reviewed)
        report(version, comparison, passes, f"{args.journal} journal, gate {args.compose}")
        _say(f"  total {time.monotonic() - started:.0f} s")
        if comparison.unexpected:
            status = max(status, 1)
        everything[version] = {
            "files": files,
            "passes": {
                p.name: {"seconds": round(p.seconds, 1), "summary": p.last_line} for p in passes
            },
            "summary": comparison.summary(),
            "collection_errors": comparison.collection_errors,
            "stale_reviews": comparison.stale_reviews,
            "tests": [row.as_dict() for row in comparison.rows],
        }
    if args.json is not None:
        args.json.write_text(json.dumps(everything, indent=1, sort_keys=True))
    return status


if __name__ == "__main__":
    sys.exit(main())
