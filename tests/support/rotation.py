"""Matrices sized by rotation: a test marked ``rotation(param, reference)`` runs each
combination of its other parameters on the reference values of ``param`` and on one of the
others in turn (every other value on at least one combination, more than one value per
combination when the combinations are fewer than the other values); its other cells are
exhaustive (``-m exhaustive`` with ``AGENTS_RECONCILE_TEST_EXHAUSTIVE=1``).

A store or journal matrix repeats the same rule of the wrapper over every backend; what only
a backend does is proved by the backends' own suites (``tests/backends``), so the default run
needs each rule once per backend kind (the reference values) and each backend somewhere.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pytest


def value_name(value: Any) -> str:
    """A parameter's value by a name that every worker process gives it alike: a backend,
    a store or an enum member by its name, anything else by its ``repr``."""
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else repr(value)


def rotate(items: Sequence[pytest.Item]) -> None:
    """Mark ``exhaustive`` the cells the rotation leaves out of the default run."""
    tests: dict[str, dict[tuple[Any, ...], list[tuple[str, pytest.Item]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for item in items:
        marker = item.get_closest_marker("rotation")
        spec = getattr(item, "callspec", None)
        if marker is None or spec is None:
            continue
        param = marker.args[0]
        combination = tuple(
            (name, value_name(spec.params[name])) for name in sorted(spec.params) if name != param
        )
        test = f"{item.path}::{item.originalname}"  # type: ignore[attr-defined]
        tests[test][combination].append((value_name(spec.params[param]), item))
    for combinations in tests.values():
        ordered = sorted(combinations)
        marker = next(iter(combinations.values()))[0][1].get_closest_marker("rotation")
        assert marker is not None
        reference = set(marker.args[1])
        seen: dict[str, None] = {}
        for combination in ordered:
            for name, _ in combinations[combination]:
                if name not in reference:
                    seen.setdefault(name)
        others = list(seen)
        if not others:
            continue
        turns = min(len(ordered), len(others))
        for index, combination in enumerate(ordered):
            chosen = {name for at, name in enumerate(others) if at % turns == index % turns}
            for name, item in combinations[combination]:
                if name not in reference and name not in chosen:
                    item.add_marker(pytest.mark.exhaustive)
