"""The tutorial (docs/tutorial.md) runs as written: its app, its operator's commands, its test."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.forkserver import ForkServer

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "tutorial"
# The page's shell session, command by command (lines starting with "$ ") with their output;
# docs/tutorial.md includes it section by section.
SESSION = APP / "session.txt"
# Where the page says the commands ran; the output names it in paths.
SHOWN_DIRECTORY = "/home/you/chat-app"
INTENT_ID = re.compile(r"\b[0-9a-f]{32}\b")

# What differs from run to run, and is compared as a placeholder (both sides).
VARYING = (
    (INTENT_ID, "<intent id>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\b"), "<time>"),
    (re.compile(r"\S+#[0-9a-f]+/\d+(/\d+~\d+)?"), "<owner>"),
    (re.compile(r"\(by \S+\)"), "(by <actor>)"),
    (re.compile(r"\b\d+(\.\d+)?(ms|s|m|h|d)\b"), "<duration>"),
    (re.compile(r"[ \t]+"), " "),  # table columns are as wide as their widest value
)


def steps() -> list[tuple[str, list[str]]]:
    """(command, the output the page shows) for every command of the session."""
    found: list[tuple[str, list[str]]] = []
    for line in SESSION.read_text("utf-8").splitlines():
        if "--8<--" in line:
            continue  # a section marker, for the page
        if line.startswith("$ "):
            found.append((line[2:], []))
        else:
            assert found, f"{SESSION} starts with output, not a command: {line!r}"
            found[-1][1].append(line)
    return found


def comparable(lines: list[str], directory: Path | None = None) -> list[str]:
    text = "\n".join(lines).strip("\n")
    if directory is not None:
        text = text.replace(str(directory), SHOWN_DIRECTORY)
    for pattern, placeholder in VARYING:
        text = pattern.sub(placeholder, text)
    return [line.rstrip() for line in text.splitlines()]


def copy_the_app(directory: Path) -> dict[str, str]:
    """Copy the app's files into ``directory`` as the page says (``*.py`` and ``pytest.ini``);
    the environment a reader runs them in: this package and its [dev] extra's pytest plugins
    importable, no API key, no variable of this package."""
    for path in [*APP.glob("*.py"), APP / "pytest.ini"]:
        shutil.copy(path, directory / path.name)
    env = {
        name: value
        for name, value in os.environ.items()
        if name != "OPENAI_API_KEY" and not name.startswith("AGENTS_RECONCILE")
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYTEST_ADDOPTS"] = "-p no:cacheprovider"  # nothing but the app's files left there
    return env


def test_every_command_of_the_tutorial_prints_what_the_tutorial_shows(tmp_path: Path) -> None:
    """Each command of the tutorial's session (the app's messages, the failed saves and their
    recovery, the denial, the operator's ``status``, ``show`` and ``resolve`` through the real
    command line, the latter as ``show`` printed it, the app's own pytest test with the
    plugins the package's [dev] extra installs) is run in order, offline, in a directory
    holding the app's files, and prints what the page shows, ids, owners, times and paths
    aside."""
    env = copy_the_app(tmp_path)

    intent_id = None
    # Each command runs in a child of a fork server that imported the SDK once (as a fresh
    # interpreter would, in the app's directory and environment), not in a new interpreter.
    with ForkServer(env) as server:
        for command, shown in steps():
            command = command.replace(SHOWN_DIRECTORY, str(tmp_path))
            if intent_id is not None:  # the page's id is its run's: use this run's
                command = INTENT_ID.sub(intent_id, command)
            run = server.run(shlex.split(command), cwd=tmp_path, env=env, timeout=180)
            printed = (run.stdout + run.stderr).splitlines()
            assert comparable(printed, tmp_path) == comparable(shown), f"$ {command}"
            if intent_id is None and (found := INTENT_ID.search(run.stdout)):
                intent_id = found.group(0)
    assert intent_id is not None, "the session never showed a denied intent"


def test_the_apps_tests_leave_nothing_in_the_journal_the_app_is_configured_with(
    tmp_path: Path,
) -> None:
    """With the app's ``JOURNAL`` pointed at a journal of its own (a server's, in a fleet; a
    file elsewhere here), the app's tests still run on a journal in their own directories:
    the denial one of them provokes is never left for the app's operators to resolve."""
    app = tmp_path / "chat-app"
    app.mkdir()
    env = copy_the_app(app)
    shared = tmp_path / "shared" / "journal.db"
    shared.parent.mkdir()
    source = (app / "chat.py").read_text("utf-8")
    line = "JOURNAL: IntentJournal | str | None = None"
    assert line in source, "the app names its journal in one line"
    (app / "chat.py").write_text(source.replace(line, f"JOURNAL = {str(shared)!r}"), "utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "test_chat.py"],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout and "warning" not in run.stdout.lower(), run.stdout
    assert not shared.exists(), "a test of the app wrote to the app's own journal"
