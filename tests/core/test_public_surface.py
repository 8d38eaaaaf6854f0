"""The API reference (docs/api.md) documents the public API: all of it, and nothing else."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api.md"

# What a user imports; every other module's name starts with an underscore.
PUBLIC_MODULES = (
    "agents_reconcile",
    "agents_reconcile.errors",
    "agents_reconcile.testing",
    "agents_reconcile.conformance",
    "agents_reconcile.backend_kit",
)


@dataclass
class Entry:
    """One ``::: path`` of api.md, with the options mkdocstrings renders it with."""

    path: str
    members: list[str] | bool | None = None  # a list, False (none), or None (all public)
    filters: list[str] = field(default_factory=list)
    show_bases: bool = True


def global_filters() -> list[str]:
    """The ``filters`` mkdocs.yml gives every entry."""
    found = re.search(r"^\s+filters: (\[.*\])$", (ROOT / "mkdocs.yml").read_text("utf-8"), re.M)
    assert found, "mkdocs.yml sets no filters for mkdocstrings"
    filters: list[str] = json.loads(found.group(1))
    return filters


def entries() -> list[Entry]:
    """Every entry of api.md, in order."""
    found: list[Entry] = []
    listing: list[str] | None = None
    for line in API.read_text("utf-8").splitlines():
        if line.startswith("::: "):
            found.append(Entry(line[4:].strip(), filters=global_filters()))
            listing = None
        elif found and line.startswith("    ") and line.strip():
            option = line.strip()
            if option.startswith("members:"):
                value = option.removeprefix("members:").strip()
                if value == "false":
                    found[-1].members = False
                else:
                    listing = found[-1].members = []
            elif option.startswith("filters:"):
                found[-1].filters = json.loads(option.removeprefix("filters:").strip())
            elif option == "show_bases: false":
                found[-1].show_bases = False
            elif option.startswith("- ") and listing is not None:
                listing.append(option[2:].strip())
        elif line.strip():
            listing = None
    return found


def split(path: str) -> tuple[str, str | None]:
    """``path`` as (module, name in it), the module being the longest one that imports."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            importlib.import_module(module)
        except ImportError:
            continue
        rest = parts[cut:]
        assert len(rest) <= 1, f"{path}: a member of a member"
        return module, (rest[0] if rest else None)
    raise AssertionError(f"{path} names no module")


def rendered_names(entry: Entry) -> list[tuple[str, str]]:
    """The (public module, name) pairs an entry renders as entries of their own."""
    module, name = split(entry.path)
    if name is not None:
        return [(module, name)]
    if entry.members is False:
        return []
    exported: list[str] = importlib.import_module(module).__all__
    return [(module, each) for each in (entry.members or exported)]


def test_every_entry_of_the_api_reference_is_importable_from_a_public_module() -> None:
    """Each ``:::`` entry of api.md, and each member it lists, is a name a public module
    exports (in its ``__all__``): nothing from a module whose name starts with an underscore."""
    wrong = []
    for entry in entries():
        module, _ = split(entry.path)
        if module not in PUBLIC_MODULES:
            wrong.append(f"{entry.path}: {module} is not a public module")
            continue
        for owner, each in rendered_names(entry):
            exported = importlib.import_module(owner).__all__
            if each not in exported:
                wrong.append(f"{entry.path}: {each} is not in {owner}.__all__")
    assert not wrong, "\n".join(wrong)


def test_every_public_name_is_in_the_api_reference() -> None:
    """Every name a public module exports is rendered by some entry of api.md, under that
    module or under another public module that exports the same object."""
    documented: set[tuple[str, int]] = set()
    for entry in entries():
        for module, name in rendered_names(entry):
            documented.add((name, id(getattr(importlib.import_module(module), name))))
    missing = [
        f"{module}.{name}"
        for module in PUBLIC_MODULES
        for name in importlib.import_module(module).__all__
        if (name, id(getattr(importlib.import_module(module), name))) not in documented
    ]
    assert not missing, f"not in docs/api.md: {missing}"


# -- what the entries show: no type a user cannot import --------------------------------------


def is_private_path(path: str) -> bool:
    """Whether ``path`` (a canonical path) lies in one of the package's private modules."""
    parts = path.split(".")
    return parts[0] == "agents_reconcile" and any(
        part.startswith("_") and not part.startswith("__") for part in parts[1:]
    )


@pytest.fixture(scope="module")
def package() -> Any:
    """The package as mkdocstrings reads it (griffe, from the source)."""
    griffe = pytest.importorskip("griffe")
    return griffe.load(
        "agents_reconcile", search_paths=[str(ROOT)], resolve_aliases=True, resolve_external=False
    )


def find(package: Any, path: str) -> Any:
    """The object at ``path``, through any re-exports to where it is defined."""
    found = package
    for part in path.split(".")[1:]:
        found = found.members[part]
        if found.is_alias:
            griffe = importlib.import_module("griffe")
            try:
                found = found.final_target
            except griffe.AliasResolutionError:  # another package's (the driver's)
                raise KeyError(path) from None
    return found


def canonical(package: Any, path: str) -> str:
    """Where the object ``path`` names is defined: in another package for a name re-exported
    from one, ``path`` itself when it is not found."""
    griffe = importlib.import_module("griffe")
    found = package
    for part in path.split(".")[1:]:
        found = found.members.get(part) if hasattr(found, "members") else None
        if found is None:
            return path
        if found.is_alias:
            try:
                found = found.final_target
            except griffe.AliasResolutionError:
                return str(found.target_path)
    return str(found.path)


def passes(name: str, filters: list[str]) -> bool:
    """Whether mkdocstrings' ``filters`` let a member called ``name`` through."""
    for pattern in filters:
        negated = pattern.startswith("!")
        if bool(re.search(pattern.lstrip("!"), name)) == negated:
            return False
    return True


def shown(obj: Any, filters: list[str]) -> Iterator[Any]:
    """``obj`` and the members of it that its page entry shows (mkdocstrings' defaults: not
    inherited, documented, through the filters), recursively."""
    yield obj
    if not (obj.is_class or obj.is_module):
        return
    for name, member in obj.members.items():
        if member.is_alias or not passes(name, filters):
            continue
        if member.docstring is None and not member.is_class:
            continue
        yield from shown(member, filters)


def names_in(obj: Any, show_bases: bool) -> Iterator[tuple[str, Any]]:
    """(where, expression) for every annotation, base and attribute value the entry shows."""
    if obj.is_class:
        for base in obj.bases if show_bases else ():
            yield "base", base
        init = obj.members.get("__init__")
        if init is not None and not init.is_alias:  # merge_init_into_class
            for parameter in init.parameters:
                yield f"parameter {parameter.name}", parameter.annotation
    elif obj.is_function:
        for parameter in obj.parameters:
            yield f"parameter {parameter.name}", parameter.annotation
        yield "return", obj.returns
    elif obj.is_attribute:
        yield "annotation", obj.annotation
        yield "value", obj.value


def private_names(expression: Any) -> Iterator[str]:
    griffe = importlib.import_module("griffe")
    if not isinstance(expression, griffe.Expr):
        return
    for part in expression.iterate(flat=True):
        if not isinstance(part, griffe.ExprName) or "(" in part.canonical_path:
            continue  # not a name, or an attribute of ``self``
        if is_private_path(part.canonical_path):
            yield part.canonical_path


def public_paths(package: Any) -> set[str]:
    """The canonical paths of every name a public module exports."""
    paths = set()
    for module in PUBLIC_MODULES:
        imported: ModuleType = importlib.import_module(module)
        for name in imported.__all__:
            paths.add(canonical(package, f"{module}.{name}"))
    return paths


# Shown although internal, each for its reason: (entry and where, the type). None is: what a
# user meets is exported (``ReplicaWait``, ``conformance.Subject``, ``SigningKey``), what only
# the package passes is not in a documented signature (a memory journal's rows, a Redis
# journal's shared connections: ``another_worker`` and ``from_url`` pass them privately), and
# ``PostgresJournal.database`` (the fused append's way in) is left off the page. A type added
# here needs its reason.
KEPT: set[tuple[str, str]] = set()


def test_no_entry_of_the_api_reference_shows_a_type_a_user_cannot_import(package: Any) -> None:
    """No signature, base or attribute the API reference shows names a type of a private module
    that no public module exports (such a name leads a reader nowhere), except those ``KEPT``
    lists with their reasons."""
    public = public_paths(package)
    leaks = set()
    for entry in entries():
        for module, name in rendered_names(entry):
            root = find(package, f"{module}.{name}")
            for obj in shown(root, entry.filters):
                label = f"{module}.{name}{obj.path.removeprefix(root.path)}"
                for where, expression in names_in(obj, entry.show_bases):
                    for path in private_names(expression):
                        defined = canonical(package, path)
                        parts = defined.split(".")
                        prefixes = {".".join(parts[:cut]) for cut in range(1, len(parts) + 1)}
                        if prefixes & public or not is_private_path(defined):
                            continue  # a public name, a member of one, or another package's
                        if is_type_variable(package, defined):
                            continue
                        leaks.add((f"{label} ({where})", parts[-1]))
    unexplained = sorted(leaks - KEPT)
    assert not unexplained, "internal types shown in docs/api.md: " + ", ".join(
        f"{place}: {name}" for place, name in unexplained
    )
    assert not KEPT - leaks, f"KEPT lists what is no longer shown: {sorted(KEPT - leaks)}"


def is_type_variable(package: Any, path: str) -> bool:
    try:
        found = find(package, path)
    except KeyError:
        return False
    return bool(found.is_attribute and str(found.value).startswith("TypeVar("))
