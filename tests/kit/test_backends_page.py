"""docs/backends.md on writing and checking one's own backend says what the code does."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

from agents_reconcile import backend_kit
from agents_reconcile.conformance import KINDS, contracts

PAGE = Path(__file__).resolve().parents[2] / "docs" / "backends.md"


def _section(title: str) -> str:
    """The page's section under the heading ``## title``, up to the next one."""
    text = PAGE.read_text("utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)


def _named_blocks(section: str) -> dict[str, str]:
    """The section's Python blocks whose first line names their file (``# name.py``)."""
    named: dict[str, str] = {}
    for block in _blocks(section, "python"):
        found = re.match(r"# (\S+\.py)\n", block)
        if found:
            named[found.group(1)] = block
    return named


def _words(line: str) -> list[str]:
    """A report line's words: its columns are padded to the widest name, which may change."""
    return line.split()


def test_the_worked_example_prints_what_the_page_says(tmp_path: Path) -> None:
    """The worked example, run as the page shows it, prints each line the page quotes from its
    report and the very counts the page gives."""
    section = _section("Checking your own backend")
    for name, code in _named_blocks(section).items():
        (tmp_path / name).write_text(code)
    done = subprocess.run(
        [sys.executable, "check_my_journal.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.strip().splitlines()
    (quoted,) = [block for block in _blocks(section, "text") if re.search(r"\d+ passed, ", block)]
    *lines, counts = quoted.strip().splitlines()
    assert counts == printed[-1]
    assert lines, "the page quotes no line of the report"
    missing = [line for line in lines if _words(line) not in [_words(p) for p in printed]]
    assert not missing, f"the report prints none of {missing}"


def test_the_pytest_counts_on_the_page_are_those_of_the_contracts() -> None:
    """The counts the page gives for its pytest module are the journal's contracts (one
    failed; the two schema ones and the read through another object skipped) and the
    session's (all passed)."""
    section = _section("Checking your own backend")
    (stated,) = re.findall(r"`(\d+) failed, (\d+) passed, (\d+) skipped`", section)
    journal = len(contracts("journal", "effects", "aside", "pages", "retention", "sealing"))
    expected = (1, journal - 4 + len(contracts("session")), 3)
    assert tuple(int(n) for n in stated) == expected


def test_the_components_table_names_every_component_and_its_contracts_kind() -> None:
    """The components table has a row per component, each naming the conformance kind that
    checks it, and no kind of journal contract is left out."""
    section = _section("Writing your own journal or store")
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    by_attribute = {row.split("|")[1].strip().strip("`"): row for row in rows}
    components = ("effects", "aside", "pages", "retention", "sealing")
    for name in components:
        assert name in by_attribute, f"no row for journal.{name}"
        assert f"(`{name}`)" in by_attribute[name], f"journal.{name}'s row names no kind"
    assert set(KINDS) - {"journal", "store", "session"} == set(components)


def test_the_pages_code_that_imports_the_kit_runs() -> None:
    """Each Python block of the section on writing one's own backend runs as shown, and every
    name it imports from the kit is there."""
    section = _section("Writing your own journal or store")
    blocks = _blocks(section, "python")
    assert blocks
    for block in blocks:
        for name in re.findall(r"^\s+(\w+),$", block, re.MULTILINE):
            assert name in backend_kit.__all__, name
        exec(compile(block, str(PAGE), "exec"), {})


def test_the_kit_table_names_only_what_the_kit_exports() -> None:
    """Every type or helper the page's table of the kit names is exported by the kit."""
    section = _section("Writing your own journal or store")
    lines = section.splitlines()
    start = lines.index("| you write | it meets | the types its methods use |")
    rows = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start + 2 :]))
    named = set(re.findall(r"`([A-Za-z_]+)`", "\n".join(row.split("|")[3] for row in rows)))
    # Not the kit's: the journal's attribute, the SDK's protocol, and the package's own error.
    elsewhere = {"keyring", "Session", "RevisionConflict", "agents_reconcile"}
    assert named - elsewhere <= set(backend_kit.__all__)
    assert {"Owner", "Opened", "Page", "RawIntent", "Keyring", "WriteRecord"} <= named
