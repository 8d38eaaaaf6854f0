"""The public kit for backend authors: everything a journal or a store of one's own needs."""

from __future__ import annotations

import ast
import inspect
import re
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agents_reconcile
from agents_reconcile import backend_kit

ROOT = Path(__file__).resolve().parents[2]
TOYS = ROOT / "tests" / "support" / "conformance_toys.py"

PROTOCOLS = (
    backend_kit.IntentJournal,
    backend_kit.JournalEffects,
    backend_kit.JournalAside,
    backend_kit.JournalPages,
    backend_kit.JournalRetention,
    backend_kit.JournalSealing,
    backend_kit.RevisionedStore,
)

# The toys break the shipped in-memory journal by subclassing its own parts (its components
# over its private rows), which no journal of one's own does; and they reach into the
# conformance suite's internals to test the suite itself. Every other private name they use
# must come from the kit.
NOT_FOR_AUTHORS = ("agents_reconcile._backends.memory.", "agents_reconcile.conformance.")


def _package_types(annotation: Any) -> Iterator[type]:
    """The classes of this package that ``annotation`` names, however deeply nested."""
    if isinstance(annotation, type) and annotation.__module__.startswith("agents_reconcile"):
        yield annotation
    origin = typing.get_origin(annotation)
    if origin is not None:
        yield from _package_types(origin)
    for argument in typing.get_args(annotation):
        yield from _package_types(argument)


def _signature_types(protocol: type) -> dict[str, set[type]]:
    """By member, the classes of this package each public member's signature names."""
    module = sys.modules[protocol.__module__]
    # Names the protocol's module imports only for type checkers resolve from the kit alone:
    # one the kit lacks is a NameError here.
    namespace = {**vars(backend_kit), **vars(module)}
    found: dict[str, set[type]] = {}
    for name, annotation in typing.get_type_hints(protocol, globalns=namespace).items():
        found.setdefault(name, set()).update(_package_types(annotation))
    for name, member in inspect.getmembers(protocol):
        if name.startswith("_"):
            continue
        function = member.fget if isinstance(member, property) else member
        if not callable(function):
            continue
        hints = typing.get_type_hints(function, globalns=namespace)
        for annotation in hints.values():
            found.setdefault(name, set()).update(_package_types(annotation))
    return found


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda protocol: protocol.__name__)
def test_every_type_a_protocols_signatures_name_is_importable_from_the_kit(
    protocol: type,
) -> None:
    """Every class of this package that a journal, component or store protocol's signatures
    name is exported by the kit, as that very class."""
    missing = {
        f"{member}: {kind.__module__}.{kind.__qualname__}"
        for member, kinds in _signature_types(protocol).items()
        for kind in kinds
        if kind.__name__ not in backend_kit.__all__
        or getattr(backend_kit, kind.__name__) is not kind
    }
    assert not missing, f"the kit lacks {sorted(missing)}"


def test_the_protocols_signatures_name_the_types_backend_authors_asked_for() -> None:
    """The types the protocols' signatures reach include the ones a backend of one's own
    could not import before the kit (a check that the walk above finds them)."""
    reached = {
        kind.__name__
        for protocol in PROTOCOLS
        for kinds in _signature_types(protocol).values()
        for kind in kinds
    }
    assert {
        "Owner",
        "Opened",
        "Page",
        "RawIntent",
        "SetAside",
        "Effect",
        "WriteRecord",
        "Pruned",
        "Retention",
        "JournalEntry",
        "IntentState",
    } <= reached


def test_the_kit_lists_each_name_once_and_every_name_resolves() -> None:
    """The kit's ``__all__`` names each export once, and each is an attribute."""
    names = backend_kit.__all__
    assert len(names) == len(set(names))
    assert [name for name in names if not hasattr(backend_kit, name)] == []
    assert {"COUNT_LIMIT", "Keyring", "EffectState", "Capabilities", "collecting_damage"} <= set(
        names
    )


def test_the_kit_exports_what_the_package_exports_as_the_same_objects() -> None:
    """A name both the package and the kit export is one object, whichever way imported."""
    shared = set(backend_kit.__all__) & set(agents_reconcile.__all__)
    assert shared, "the kit and the package share no name"
    assert {
        name for name in shared if getattr(backend_kit, name) is not getattr(agents_reconcile, name)
    } == set()


def _private_imports(path: Path) -> dict[str, str]:
    """Each name ``path`` imports from a private module of this package, and that module."""
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if not isinstance(node, ast.ImportFrom) or node.module is None:
            continue
        parts = node.module.split(".")
        if parts[0] != "agents_reconcile" or not any(p.startswith("_") for p in parts[1:]):
            continue
        for alias in node.names:
            found[alias.name] = node.module
    return found


def test_the_toy_journals_need_nothing_private_that_the_kit_lacks() -> None:
    """Every name the conformance suite's toy journals import from a private module is in the
    kit, but for the in-memory engine's own parts they subclass and the suite's internals."""
    imported = _private_imports(TOYS)
    assert imported, "the toys import nothing private: the test reads the wrong file"
    lacking = {
        f"{module}.{name}"
        for name, module in imported.items()
        if not (module + ".").startswith(NOT_FOR_AUTHORS) and name not in backend_kit.__all__
    }
    assert not lacking, f"the kit lacks {sorted(lacking)}"


def test_collecting_damage_reports_a_damaged_row_and_leaves_it_out() -> None:
    """``each`` under ``collecting_damage`` reports a row whose record fails its checks and
    builds the others; outside it, the same row fails the whole read."""

    def make(row: tuple[str, bytes]) -> object:
        return backend_kit.checked_decision(row[0], "s-1", row[1])

    rows = [("i-1", b"not a record")]
    with pytest.raises(agents_reconcile.RecordError):
        backend_kit.each(rows, make, lambda row: ("decision", row[0], "s-1"))
    with backend_kit.collecting_damage() as damaged:
        assert backend_kit.each(rows, make, lambda row: ("decision", row[0], "s-1")) == []
    assert [(d.kind, d.ident, d.session_id) for d in damaged] == [("decision", "i-1", "s-1")]


def test_an_effect_is_signed_with_the_public_signing_key_as_an_intent_is() -> None:
    """``Effect.sign_key`` is a ``SigningKey``, the public type ``PendingWrite.sign_key`` has
    (it was a signer object no public module exports): an effect signed with one carries its
    MAC and reads back under a keyring that verifies with the same key."""
    import dataclasses

    from agents_reconcile._core.signing import Signer
    from agents_reconcile.conformance._records import make_effect

    key = agents_reconcile.SigningKey(b"a deployment's signing key, 32 bytes")
    signed = dataclasses.replace(make_effect("signed-call"), sign_key=key)
    data = signed.encode()
    assert key.key_id in data.decode(), "the MAC names its key"
    keyring = backend_kit.Keyring()
    keyring.add_signer(Signer([key]))
    assert backend_kit.Effect.decode(data, keyring) == signed


def test_every_name_of_the_kit_is_in_the_api_reference() -> None:
    """The API reference renders every name the kit exports, from the kit or, for the
    package's own names, from ``agents_reconcile``."""
    reference = (ROOT / "docs" / "api.md").read_text("utf-8")
    rendered = set(re.findall(r"^::: agents_reconcile\.(?:backend_kit\.)?(\w+)$", reference, re.M))
    assert set(backend_kit.__all__) - rendered == set()
