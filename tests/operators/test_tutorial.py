"""The tutorial (docs/tutorial.md) runs as written: its app, its operator's commands, its test."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

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


def command_line() -> list[str]:
    """The command line's installed entry point (``python -m agents_reconcile`` without it)."""
    script = Path(sys.executable).parent / "agents-reconcile"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "agents_reconcile"]


def test_every_command_of_the_tutorial_prints_what_the_tutorial_shows(tmp_path: Path) -> None:
    """Each command of the tutorial's session (the app's messages, the failed saves and their
    recovery, the denial, the operator's ``status``, ``show`` and ``resolve`` through the real
    command line, the app's own pytest test) is run in order, offline, in a directory holding
    the app's files, and prints what the page shows, ids, owners, times and paths aside."""
    for name in ("plain_chat.py", "chat.py", "test_chat.py"):
        shutil.copy(APP / name, tmp_path / name)
    env = {
        name: value
        for name, value in os.environ.items()
        if name != "OPENAI_API_KEY" and not name.startswith("AGENTS_RECONCILE")
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    # The app's test as a reader without this repository's pytest plugins runs it.
    env["PYTEST_ADDOPTS"] = "-p no:asyncio -p no:cacheprovider"

    intent_id = None
    for command, shown in steps():
        if intent_id is not None:  # the page's id is its run's: use this run's
            command = INTENT_ID.sub(intent_id, command)
        argv = shlex.split(command)
        if argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        elif argv[0] == "agents-reconcile":
            argv = [*command_line(), *argv[1:]]
        run = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
        )
        printed = (run.stdout + run.stderr).splitlines()
        assert comparable(printed, tmp_path) == comparable(shown), f"$ {command}"
        if intent_id is None and (found := INTENT_ID.search(run.stdout)):
            intent_id = found.group(0)
    assert intent_id is not None, "the session never showed a denied intent"
