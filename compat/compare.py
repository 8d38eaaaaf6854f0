"""Comparing the two passes: what passes as the SDK ships it must pass wrapped, unless the
reviewed list says why not."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

__all__ = [
    "Comparison",
    "Reviewed",
    "Row",
    "compare",
    "error_group",
    "exercised",
]

SAME: Final = "same"
"""Passed in both passes."""
UNEXPECTED: Final = "unexpected"
"""Passed unwrapped, did not pass wrapped, and is not on the reviewed list."""
REVIEWED: Final = "reviewed"
"""Passed unwrapped, did not pass wrapped, and the reviewed list says why."""
NOT_EXERCISED: Final = "not_exercised"
"""Passed unwrapped without handing the runner a session: wrapping cannot change it."""
BASELINE: Final = "baseline"
"""Did not pass unwrapped (failed, skipped, xfailed): nothing to compare."""


@dataclasses.dataclass(frozen=True)
class Reviewed:
    """``compat/reviewed.toml``: node id -> why the wrapped run may differ.

    An id without a parameter part (``[...]``) covers every parametrization of the test.
    """

    reasons: Mapping[str, str]

    @classmethod
    def load(cls, path: Path) -> Reviewed:
        if not path.is_file():
            return cls({})
        data = tomllib.loads(path.read_text())
        table = data.get("reviewed", {})
        if not isinstance(table, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in table.items()
        ):
            raise ValueError(f"{path}: [reviewed] must map node ids to non-empty reasons")
        return cls(dict(table))

    def reason(self, nodeid: str) -> str | None:
        found = self.reasons.get(nodeid)
        if found is None and "[" in nodeid:
            found = self.reasons.get(nodeid.split("[", 1)[0])
        return found

    def keys_used(self, nodeids: Iterable[str]) -> set[str]:
        used: set[str] = set()
        for nodeid in nodeids:
            if nodeid in self.reasons:
                used.add(nodeid)
            elif "[" in nodeid and nodeid.split("[", 1)[0] in self.reasons:
                used.add(nodeid.split("[", 1)[0])
        return used


@dataclasses.dataclass
class Row:
    """One test's two outcomes."""

    nodeid: str
    unwrapped: str
    wrapped: str | None
    status: str
    counts: dict[str, Any]
    reason: str | None = None
    message: str | None = None
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Comparison:
    """Both passes of one SDK version, test by test."""

    rows: list[Row]
    collection_errors: dict[str, dict[str, str]]
    stale_reviews: list[str]
    """Reviewed ids whose tests passed wrapped (or were not run at all)."""

    def count(self, status: str) -> int:
        return sum(1 for row in self.rows if row.status == status)

    @property
    def unexpected(self) -> list[Row]:
        return [row for row in self.rows if row.status == UNEXPECTED]

    def summary(self) -> dict[str, int]:
        rows = self.rows
        exercised_rows = [r for r in rows if r.counts.get("runs", 0) > 0]
        return {
            "selected": len(rows),
            "passed_unwrapped": sum(1 for r in rows if r.unwrapped == "passed"),
            "exercised_session": len(exercised_rows),
            "rerun_wrapped": sum(1 for r in rows if r.wrapped is not None),
            "passed_wrapped": sum(1 for r in rows if r.wrapped == "passed"),
            "failing_wrapped_only": self.count(UNEXPECTED),
            "reviewed": self.count(REVIEWED),
            "not_exercised": self.count(NOT_EXERCISED),
            "baseline_not_passing": self.count(BASELINE),
            "refused_by_wrapper": sum(1 for r in rows if r.counts.get("refused")),
            "blocked_network": sum(1 for r in rows if r.counts.get("blocked")),
            "warned_but_passed": sum(
                1 for r in rows if r.wrapped == "passed" and r.counts.get("warnings")
            ),
            "stale_reviews": len(self.stale_reviews),
        }


def exercised(unwrapped: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Tests that passed unwrapped and handed the runner a session: the wrapped pass reruns
    these (the others cannot change, the plugin touching only sessions the runner sees)."""
    return sorted(
        nodeid
        for nodeid, result in unwrapped.items()
        if result.get("outcome") == "passed" and result.get("counts", {}).get("runs", 0) > 0
    )


def compare(
    unwrapped: Mapping[str, Any], wrapped: Mapping[str, Any], reviewed: Reviewed
) -> Comparison:
    """Rows for every test of the unwrapped pass (``tests`` of each pass's results)."""
    before: Mapping[str, Mapping[str, Any]] = unwrapped.get("tests", {})
    after: Mapping[str, Mapping[str, Any]] = wrapped.get("tests", {})
    rows: list[Row] = []
    for nodeid in sorted(before):
        first = before[nodeid]
        second = after.get(nodeid)
        outcome = str(first.get("outcome"))
        counts = dict(first.get("counts", {}))
        if second is not None:
            counts = dict(second.get("counts", {})) or counts
        row = Row(
            nodeid=nodeid,
            unwrapped=outcome,
            wrapped=None if second is None else str(second.get("outcome")),
            status=SAME,
            counts=counts,
        )
        if outcome != "passed":
            row.status = BASELINE
        elif second is None:
            ran = first.get("counts", {}).get("runs", 0) > 0
            row.status = UNEXPECTED if ran else NOT_EXERCISED
            if ran:
                row.message = "no wrapped result (the wrapped pass did not run it)"
        elif second.get("outcome") != "passed":
            row.message = second.get("message")
            row.detail = second.get("detail")
            row.reason = reviewed.reason(nodeid)
            row.status = REVIEWED if row.reason is not None else UNEXPECTED
        rows.append(row)
    used = reviewed.keys_used(r.nodeid for r in rows if r.status == REVIEWED)
    errors = {
        "unwrapped": dict(unwrapped.get("collection_errors", {})),
        "wrapped": dict(wrapped.get("collection_errors", {})),
    }
    return Comparison(
        rows=rows, collection_errors=errors, stale_reviews=sorted(set(reviewed.reasons) - used)
    )


_ADDRESS: Final = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER: Final = re.compile(r"\b\d+\b")
_GROUP_CHARS: Final = 110


def error_group(message: str | None) -> str:
    """A failure's group: its first line, addresses and numbers blurred, cut short."""
    first = (message or "(no message)").strip().splitlines()[0] if message else "(no message)"
    first = _NUMBER.sub("N", _ADDRESS.sub("0x…", first))
    return first if len(first) <= _GROUP_CHARS else first[: _GROUP_CHARS - 1] + "…"


def grouped(rows: Iterable[Row]) -> dict[str, list[Row]]:
    """Rows by error group, largest group first."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[error_group(row.message)].append(row)
    return dict(sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])))
