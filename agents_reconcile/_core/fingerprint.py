"""Canonical bytes and digests of session items, and the exact journal copy of a batch.

A digest is blake3 over the item's canonical bytes, after the SDK's own normalisation of an
input item (pydantic items dumped with ``exclude_unset``, the SDK's session-only metadata keys
removed, and ``id`` removed for sessions that declare ``_ignore_ids_for_matching``). The
scheme's name (``blake3-orjson-sorted/2``) is stored in every record, so a record made under
another scheme is never compared against digests made under this one: it is refused.

An item's canonical bytes are orjson's, with sorted keys. orjson writes NaN and the
infinities as ``null``: an item holding one has those bytes, then 0xff (a byte UTF-8 JSON
never holds, so the two parts cannot be confused), then the JSON list ``[[path, kind], ...]``
of its non-finite floats in the order of the canonical bytes, ``kind`` being ``"nan"``,
``"inf"`` or ``"-inf"``.

orjson cannot write a str holding a lone surrogate (``"\\ud800"``, as ``surrogateescape``
decoding gives), as a value or as a dict key. Such an item's bytes are 0xfe (another byte
UTF-8 JSON never holds, and not the trailer's 0xff) followed by the stdlib's JSON text of the
item: ``json.dumps`` with sorted keys, compact separators, ``ensure_ascii`` (so each surrogate
is written as its ``\\uXXXX`` escape) and ``allow_nan`` (so NaN and the infinities are the
tokens ``NaN``, ``Infinity`` and ``-Infinity``, and such an item needs no trailer). Only JSON's
own types (and the subclasses orjson writes as their base type) are written that way; an item
holding anything else as well is refused.

A record keeps a batch as JSON too: NaN and the infinities as ``null`` with marks saying what
stood there, and an item holding a lone surrogate as its JSON text (``as_json_texts``); the
``restore_*`` functions put them back when the record is read.
"""

from __future__ import annotations

import copy
import enum
import json
import math
import re
from collections.abc import Iterable
from typing import Any, Final, Literal, TypeAlias

import orjson
from blake3 import blake3

from ..errors import FingerprintError, UnsupportedRecordVersion
from .conversation_items import VIEW_VERSIONS, conversation_view

__all__ = [
    "CONVERSATION_SCHEME",
    "FINGERPRINT_SCHEME",
    "SCHEMES",
    "NonFinite",
    "as_json_texts",
    "canonical_bytes",
    "canonical_item",
    "digest_items",
    "exact_json",
    "item_digest",
    "journal_batch",
    "nonfinite_floats",
    "restore_json_texts",
    "restore_nonfinite",
]

FINGERPRINT_SCHEME: Final = "blake3-orjson-sorted/2"
"""Name and version of the digest scheme; part of every record's binding."""
CONVERSATION_SCHEME: Final = "blake3-orjson-sorted/2+conversation-items/2"
"""The scheme of OpenAI Conversations sessions: the same digest, over each item's
``conversation_view`` (what the service adds, rewrites or withholds left out)."""
_CONVERSATION_PREFIX: Final = "blake3-orjson-sorted/2+conversation-items/"
_VIEWS: Final = {f"{_CONVERSATION_PREFIX}{version}": version for version in VIEW_VERSIONS}
SCHEMES: Final = (FINGERPRINT_SCHEME, *_VIEWS)
"""The schemes this release reads and computes (records made under an earlier Conversations
scheme are judged under it: its view is still computed)."""

Path: TypeAlias = tuple[str | int, ...]
NonFinite: TypeAlias = tuple[Path, str]
"""Where a non-finite float is (dict keys and list indices from the top) and which it is."""

# Keys the SDK strips before an item is replayed or compared (``strip_internal_input_item_metadata``
# in agents/run_internal/items.py). Items read back from a store still carry them, so a digest
# that kept them would differ between the batch we wrote and the same batch read back through a
# path that strips them.
_SESSION_ONLY_KEYS: Final = ("_agents_tool_description", "_agents_tool_title", "created_by")
_SESSION_ONLY: Final = frozenset(_SESSION_ONLY_KEYS)
_OPTIONS: Final = orjson.OPT_SORT_KEYS
_MARKER: Final = b"\xff"
_ESCAPED: Final = b"\xfe"
# A high surrogate then a low one: two code points of a str, yet its JSON escapes read back
# as the one character they encode.
_SPLIT_PAIR: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]")
# orjson refuses to write containers nested deeper than this; the walk stops there too, so a
# cyclic item is reported where it starts repeating instead of exhausting Python's stack.
_MAX_DEPTH: Final = 254
_SHOWN_STEPS: Final = 16
_SEARCH_BYTES: Final = 512
# orjson holds signed and unsigned 64-bit integers.
_INT_MIN: Final = -(2**63)
_INT_END: Final = 2**64
_ABSENT: Final = object()
_NONFINITE_VALUES: Final[dict[str, float]] = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
"""The non-finite floats by the names a record's ``nonfinite`` marks give them."""


def canonical_item(item: Any, *, ignore_ids: bool = False, view: int = 0) -> Any:
    """Return the JSON-shaped form of ``item`` that digests and records are made from
    (``view``: as version ``view`` of a Conversations scheme sees it; 0: none)."""
    if isinstance(item, dict):
        payload: Any = item
    elif hasattr(item, "model_dump"):
        try:
            payload = item.model_dump(exclude_unset=True, mode="json", warnings=False)
        except TypeError:
            payload = item.model_dump(exclude_unset=True)
    else:
        return item
    if isinstance(payload, dict) and _reshaped(payload, ignore_ids):
        payload = {
            key: value
            for key, value in payload.items()
            if key not in _SESSION_ONLY_KEYS and not (ignore_ids and key == "id")
        }
    if view and isinstance(payload, dict):
        payload = conversation_view(payload, version=view)
    return payload


def _reshaped(payload: dict[str, Any], ignore_ids: bool) -> bool:
    """Whether ``canonical_item`` leaves keys of ``payload`` out (the session-only ones, and
    ``id`` under ``ignore_ids``): a dict without them is its own canonical form."""
    return (ignore_ids and "id" in payload) or not _SESSION_ONLY.isdisjoint(payload)


def canonical_bytes(
    item: Any, *, ignore_ids: bool = False, index: int = 0, scheme: str = FINGERPRINT_SCHEME
) -> bytes:
    """Serialise one item canonically under ``scheme``, or raise ``FingerprintError`` naming
    its position."""
    return _canonical(item, ignore_ids, index, _require(scheme))


def item_digest(
    item: Any, *, ignore_ids: bool = False, index: int = 0, scheme: str = FINGERPRINT_SCHEME
) -> str:
    """Digest of one item under ``scheme`` (hex, 64 characters)."""
    return blake3(_canonical(item, ignore_ids, index, _require(scheme))).digest().hex()


def digest_items(
    items: Iterable[Any], *, ignore_ids: bool = False, scheme: str = FINGERPRINT_SCHEME
) -> tuple[str, ...]:
    """Digests of a sequence of items, in order; the first unserialisable item raises.

    For items read back from a store: they are digested as they are, without asking whether
    they are exact JSON (``journal_batch`` asks that of items about to be written)."""
    view = _require(scheme)
    return tuple(
        blake3(_canonical(item, ignore_ids, index, view)).digest().hex()
        for index, item in enumerate(items)
    )


def journal_batch(
    items: Iterable[Any], *, ignore_ids: bool = False, scheme: str = FINGERPRINT_SCHEME
) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """The batch as the journal will store it and its digests under ``scheme``, in one pass;
    ``FingerprintError`` for an item the journal could not give back equal.

    A dict is kept as the caller's own object (not copied), anything else as its
    ``canonical_item``. Decoding the journal's copy gives back values equal to these as
    JSON values (a tuple may come back as a list; NaN, the infinities and lone surrogates
    come back as themselves), so a replay writes what the caller gave.
    """
    view = _require(scheme)
    batch: list[Any] = []
    digests: list[str] = []
    for index, item in enumerate(items):
        if type(item) is dict and not view and not _reshaped(item, ignore_ids):
            # The common item, a plain dict that is its own canonical form: the steps below,
            # inline. Anything else they would look at (a value orjson refuses, one not made
            # of JSON's own types) takes them.
            try:
                data = orjson.dumps(item, option=_OPTIONS)
            except (TypeError, ValueError):
                pass
            else:
                if _plain(item) == _PLAIN:
                    batch.append(item)
                    digests.append(blake3(data).digest().hex())
                    continue
        try:
            element = item if isinstance(item, dict) else canonical_item(item)
            canon = canonical_item(element, ignore_ids=ignore_ids, view=view)
        except (TypeError, ValueError) as exc:
            raise FingerprintError(
                f"item {index} ({type(item).__name__}) cannot be serialised canonically: {exc}",
                index=index,
            ) from exc
        data, found, escaped = exact_json(canon, index=index, sort_keys=True)
        if canon is not element:
            # The digest leaves out ``id`` and the session-only keys (and a conversation's
            # view rewrites some), but the journal keeps them as given: they must survive its
            # round trip too.
            exact_json(
                {k: v for k, v in element.items() if canon.get(k, _ABSENT) is not v}, index=index
            )
        if escaped:
            data = _ESCAPED + data
        elif found:
            data += _trailer(found)
        batch.append(element)
        digests.append(blake3(data).digest().hex())
    return tuple(batch), tuple(digests)


def exact_json(
    value: Any,
    *,
    index: int = 0,
    sort_keys: bool = False,
    purpose: Literal["journal", "store"] = "journal",
) -> tuple[bytes, tuple[NonFinite, ...], bool]:
    """orjson's bytes of ``value`` (non-finite floats written as ``null``), where its
    non-finite floats are, and False; or, for a value holding a lone surrogate, which orjson
    cannot write, the stdlib's ASCII JSON text of it (surrogates as escapes, NaN and
    Infinity as tokens), no places, and True. ``FingerprintError`` if decoding that and
    putting the floats back would not give a value equal to ``value`` as JSON.

    One rule for everything written to be read back later (the journal's copy of a batch,
    a revisioned store's items): what cannot come back equal is refused before it is written.
    """
    try:
        data = orjson.dumps(value, option=_OPTIONS if sort_keys else None)
    except (TypeError, ValueError) as exc:
        _, lone = _locate_inexact(value, index, purpose)
        if lone:
            text = _escaped_text(value, sort_keys)
            if text is not None:
                return text, (), True
        raise FingerprintError(
            f"item {index} ({type(value).__name__}) cannot be serialised as JSON: {exc}",
            index=index,
        ) from exc
    # Made only of JSON's own types, what orjson wrote decodes back equal. Anything else
    # (a NaN, a subclass, an enum, a datetime orjson turned into text) takes the slow walk,
    # which tells what comes back equal from what does not.
    if _plain(value) == _PLAIN:
        return data, (), False
    return data, _locate_inexact(value, index, purpose)[0], False


def nonfinite_floats(value: Any, encoded: bytes, *, parts: int = 1) -> tuple[NonFinite, ...]:
    """Where the non-finite floats in ``value`` are, in sorted-key order; ``encoded`` is
    orjson's bytes of ``value``, a batch of ``parts`` items. Values of types other than
    JSON's are not looked into."""
    # A non-finite float is written as null. Searching the bytes for it costs about a
    # nanosecond a byte, walking the value a fraction of a microsecond a container: the
    # search is cheaper for small items, the walk for large ones (mostly long strings).
    if len(encoded) <= _SEARCH_BYTES * max(parts, 1) and b"null" not in encoded:
        return ()
    return _walk_nonfinite(value)


def as_json_texts(batch: list[Any]) -> list[int]:
    """Replace, in place, each item orjson cannot write by its exact JSON text; their
    positions. Anything else orjson refuses raises ``FingerprintError``."""
    positions: list[int] = []
    for position, element in enumerate(batch):
        try:
            orjson.dumps(element)
        except TypeError:
            text, _, escaped = exact_json(element, index=position)
            if escaped:
                batch[position] = text.decode("ascii")
                positions.append(position)
    return positions


def restore_nonfinite(batch: tuple[Any, ...], marks: Any) -> tuple[Any, ...]:
    """The batch with each non-finite float ``marks`` names put back where it holds null."""
    if not isinstance(marks, list) or not marks:
        raise TypeError("'nonfinite'")
    items = list(batch)
    copied: set[int] = set()
    for mark in marks:
        if not (isinstance(mark, list) and len(mark) == 3):
            raise TypeError("'nonfinite'")
        index, path, kind = mark
        if type(index) is not int or not 0 <= index < len(items):
            raise ValueError(f"'nonfinite' names item {index!r} of a {len(items)}-item batch")
        if not isinstance(path, list) or kind not in _NONFINITE_VALUES:
            raise TypeError("'nonfinite'")
        if index not in copied:
            # A mapping given to decode() may be the caller's own: never write into it.
            items[index] = copy.deepcopy(items[index])
            copied.add(index)
        if not path:
            if items[index] is not None:
                raise ValueError(f"'nonfinite' names item {index}, which is not null")
            items[index] = _NONFINITE_VALUES[kind]
            continue
        container = items[index]
        for step in path[:-1]:
            container = _step(container, step, index)
        last = path[-1]
        if _step(container, last, index) is not None:
            raise ValueError(f"'nonfinite' names a place in item {index} that is not null")
        container[last] = _NONFINITE_VALUES[kind]
    return tuple(items)


def restore_json_texts(batch: tuple[Any, ...], positions: Any) -> tuple[Any, ...]:
    """The batch with each item ``positions`` names decoded from the JSON text it holds."""
    if not isinstance(positions, list) or not positions:
        raise TypeError("'json_text'")
    items = list(batch)
    previous = -1
    for position in positions:
        # Increasing, so that no text is decoded twice (a text of a text would pass).
        if type(position) is not int or not previous < position < len(items):
            raise ValueError(
                f"'json_text' names item {position!r} of a {len(items)}-item batch out of order"
            )
        text = items[position]
        if not isinstance(text, str):
            raise ValueError(f"'json_text' names item {position}, which is not a JSON text")
        try:
            items[position] = json.loads(text)
        except RecursionError:
            raise ValueError(f"'json_text' item {position} is nested too deep") from None
        previous = position
    return tuple(items)


# -- internals -----------------------------------------------------------------------------


def _step(container: Any, step: Any, index: int) -> Any:
    if isinstance(container, dict) and type(step) is str and step in container:
        return container[step]
    if isinstance(container, list) and type(step) is int and 0 <= step < len(container):
        return container[step]
    raise ValueError(f"'nonfinite' names a place item {index} does not have ({step!r})")


def _require(scheme: str) -> int:
    """Refuse a scheme this release does not know; the version of the Conversations view it
    digests through (0: none)."""
    if scheme == FINGERPRINT_SCHEME:
        return 0
    view = _VIEWS.get(scheme)
    if view is not None:
        return view
    raise UnsupportedRecordVersion(
        f"fingerprint scheme {scheme!r} is unknown to this release, which computes "
        f"{' and '.join(map(repr, SCHEMES))}"
    )


def _canonical(item: Any, ignore_ids: bool, index: int, view: int = 0) -> bytes:
    try:
        canon = canonical_item(item, ignore_ids=ignore_ids, view=view)
    except (TypeError, ValueError) as exc:
        raise _not_canonical(item, index, exc) from exc
    try:
        data = orjson.dumps(canon, option=_OPTIONS)
    except (TypeError, ValueError) as exc:
        # Only here, after orjson has refused, is an item looked at for lone surrogates:
        # the common item pays nothing for them.
        escaped = _escaped(canon)
        if escaped is None:
            raise _not_canonical(item, index, exc) from exc
        return escaped
    # nonfinite_floats' test, inline: the common item is spared a call.
    if len(data) > _SEARCH_BYTES or b"null" in data:
        found = _walk_nonfinite(canon)
        if found:
            return data + _trailer(found)
    return data


def _not_canonical(item: Any, index: int, exc: Exception) -> FingerprintError:
    return FingerprintError(
        f"item {index} ({type(item).__name__}) cannot be serialised canonically: {exc}",
        index=index,
    )


def _escaped(value: Any) -> bytes | None:
    """The canonical bytes of a value orjson refused because it holds a lone surrogate; None
    if it refused it for anything else."""
    try:
        lone = _walk(value, [], [], strict=True, split_pairs=True)
    except _Inexact:
        return None
    if not lone:
        return None
    text = _escaped_text(value, True)
    return None if text is None else _ESCAPED + text


def _escaped_text(value: Any, sort_keys: bool) -> bytes | None:
    """The stdlib's compact ASCII JSON text of a value the strict walk has passed."""
    try:
        text = json.dumps(
            value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=True, allow_nan=True
        )
    except (TypeError, ValueError, RecursionError):  # the walk and the stdlib disagree
        return None
    return text.encode("ascii")


def _walk_nonfinite(value: Any) -> tuple[NonFinite, ...]:
    if _plain(value) == _PLAIN:
        return ()
    found: list[NonFinite] = []
    _walk(value, [], found, strict=False)
    return tuple(found)


def _trailer(found: tuple[NonFinite, ...]) -> bytes:
    return _MARKER + orjson.dumps([[list(path), kind] for path, kind in found])


_PLAIN: Final = 0
_NONFINITE: Final = 1
_OTHER: Final = 2


def _plain(value: Any) -> int:
    """``_PLAIN`` if ``value`` is made of JSON's own types only, ``_NONFINITE`` if it also
    holds a non-finite float, ``_OTHER`` if it holds any other type (subclasses included).

    Only for a value orjson has just serialised: its nesting is bounded and acyclic."""
    kind = type(value)
    if kind is dict:
        values: Iterable[Any] = value.values()
    elif kind is list or kind is tuple:
        values = value
    elif kind is str or kind is int or kind is bool or value is None:
        return _PLAIN
    elif kind is float:
        # x - x is 0.0 for a finite float and NaN for NaN and both infinities.
        return _PLAIN if value - value == 0.0 else _NONFINITE
    else:
        return _OTHER
    result = _PLAIN
    # Leaves are judged here rather than in a call each: calls are most of the walk's cost.
    for element in values:
        kind = type(element)
        if kind is str or element is None or kind is int or kind is bool:
            continue
        if kind is float:
            if element - element != 0.0:
                result = _NONFINITE
            continue
        if (kind is list or kind is dict) and not element:
            continue
        inner = _plain(element)
        if inner == _OTHER:
            return _OTHER
        result |= inner
    return result


class _Inexact(Exception):
    def __init__(self, path: Path, what: str) -> None:
        super().__init__(what)
        self.path = path
        self.what = what


def _locate_inexact(
    value: Any, index: int, purpose: Literal["journal", "store"]
) -> tuple[tuple[NonFinite, ...], bool]:
    """Where ``value``'s non-finite floats are and whether it holds a lone surrogate, or
    ``FingerprintError`` at the first thing in it that would not come back equal."""
    found: list[NonFinite] = []
    try:
        lone = _walk(value, [], found, strict=True)
    except _Inexact as problem:
        if problem.path:
            place = f"holds {problem.what} at {_path_text(problem.path)}"
        else:
            place = f"is {problem.what}"
        if purpose == "journal":
            consequence = (
                "the journal could not hold it exactly, so a replay would write something "
                "other than the item given"
            )
        else:
            consequence = (
                "the session could not store it exactly: it would read back as something else"
            )
        raise FingerprintError(
            f"item {index} {place}: {consequence}; nothing was written", index=index
        ) from None
    return tuple(found), lone


def _walk(
    value: Any,
    path: list[str | int],
    found: list[NonFinite],
    *,
    strict: bool,
    split_pairs: bool = False,
) -> bool:
    """Collect ``value``'s non-finite floats; when ``strict``, raise ``_Inexact`` at the first
    thing orjson would refuse or would write as something that decodes unequal, and say
    whether a str or a dict key holds a lone surrogate (written as the stdlib's escapes).

    Mirrors orjson's rules: str, int, dict and list subclasses are written as their base type
    (so str- and int-valued enums pass), dict keys must be exactly ``str``, a tuple (not a
    subclass) becomes a list, ints must fit 64 bits. A high surrogate followed by a low one
    is refused unless ``split_pairs`` (for digests, which never read the text back)."""
    lone = False
    if isinstance(value, dict):
        if len(path) >= _MAX_DEPTH:
            if strict:
                raise _Inexact(tuple(path), f"containers nested deeper than {_MAX_DEPTH} levels")
            return False
        keys = list(value)
        if strict:
            for key in keys:
                if type(key) is not str:
                    raise _Inexact(
                        tuple(path), f"a dict key of type {_type_name(key)} ({_short(key)})"
                    )
                if not _valid_utf8(key):
                    _check_pairs(key, path, split_pairs, "a dict key")
                    lone = True
        try:
            keys.sort()
        except TypeError:  # keys of mixed types: not JSON, and orjson has refused it already
            return False
        for key in keys:
            path.append(key)
            if _walk(value[key], path, found, strict=strict, split_pairs=split_pairs):
                lone = True
            path.pop()
    elif isinstance(value, list) or type(value) is tuple:
        if len(path) >= _MAX_DEPTH:
            if strict:
                raise _Inexact(tuple(path), f"containers nested deeper than {_MAX_DEPTH} levels")
            return False
        for position, element in enumerate(value):
            path.append(position)
            if _walk(element, path, found, strict=strict, split_pairs=split_pairs):
                lone = True
            path.pop()
    elif isinstance(value, float) and (type(value) is float or isinstance(value, enum.Enum)):
        if not math.isfinite(value):
            kind = "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
            found.append((tuple(path), kind))
    elif isinstance(value, str):
        if strict and not _valid_utf8(value):
            _check_pairs(value, path, split_pairs, "a str")
            return True
    elif isinstance(value, int):
        # Compared, not ``in range(...)``: that scans for an int subclass such as an IntEnum.
        if strict and not _INT_MIN <= value < _INT_END:
            raise _Inexact(
                tuple(path), f"an integer ({_type_name(value)}) beyond the 64 bits orjson writes"
            )
    elif value is not None and strict:
        raise _Inexact(tuple(path), f"a value of type {_type_name(value)}")
    return lone


def _check_pairs(text: str, path: list[str | int], split_pairs: bool, what: str) -> None:
    if not split_pairs and _SPLIT_PAIR.search(text):
        raise _Inexact(
            tuple(path),
            f"{what} with a surrogate pair as two code points (its JSON escapes read back "
            "as the one character they encode)",
        )


def _valid_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _type_name(value: Any) -> str:
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _path_text(path: Path) -> str:
    parts = []
    # A cyclic item's path runs to the depth limit: its start says enough.
    for step in path[:_SHOWN_STEPS]:
        if isinstance(step, int):
            parts.append(f"[{step}]")
        else:
            try:
                parts.append(f"[{orjson.dumps(step).decode()}]")
            except TypeError:  # a key with a lone surrogate: show it escaped
                parts.append(f"[{step!r}]")
    if len(path) > _SHOWN_STEPS:
        parts.append(f"... ({len(path)} steps)")
    return "".join(parts)
