"""Every hook the installed SDK looks up on a session is accounted for: forwarded (when the
inner session has it), or listed as deliberately not, with the reason. A new release's new hook
fails here, not in a user's run."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import agents
import pytest
from agents import SQLiteSession
from agents.extensions.memory import EncryptedSession

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._session.capabilities import FORWARDED, NOT_FORWARDED
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

SESSION_PROTOCOL = frozenset(
    {"session_id", "session_settings", "get_items", "add_items", "pop_item", "clear_session"}
)
"""What every session has: the wrapper's own methods, not forwarded hooks."""

# Parts of the SDK whose "sessions" are other things (sandboxes, MCP, voice, realtime).
_OTHER_SESSIONS = ("sandbox/", "extensions/sandbox/", "mcp/", "realtime/", "voice/")


def looked_up_on_sessions() -> dict[str, list[str]]:
    """Attribute names the SDK's source reads off a session with ``getattr``/``hasattr``
    (the object's text names a session), with where."""
    root = Path(agents.__file__).parent
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        if where.startswith(_OTHER_SESSIONS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
            ):
                continue
            target, name = node.args[0], node.args[1]
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                continue
            if "session" in ast.unparse(target).lower():
                found.setdefault(name.value, []).append(f"{where}:{node.lineno}")
    return found


def test_the_scan_finds_the_hooks_known_to_be_looked_up() -> None:
    """The scan itself works: it sees hooks the SDK is known to read off a session."""
    found = looked_up_on_sessions()
    assert "_ignore_ids_for_matching" in found and len(found) >= 3, found


def test_every_session_hook_the_sdk_looks_up_is_forwarded_or_listed_as_not() -> None:
    """A name the SDK reads off a session that the wrapper neither forwards nor lists as
    deliberately not forwarded would silently change what the SDK does, wrapped."""
    found = looked_up_on_sessions()
    unaccounted = {
        name: places
        for name, places in found.items()
        if name not in FORWARDED | SESSION_PROTOCOL | set(NOT_FORWARDED)
    }
    assert unaccounted == {}, (
        "the SDK looks these up on a session; forward them in _session/capabilities.py "
        f"or list them in NOT_FORWARDED with the reason: {unaccounted}"
    )


def test_no_hook_is_both_forwarded_and_listed_as_not() -> None:
    """The two lists are one decision each."""
    assert not FORWARDED & set(NOT_FORWARDED)


async def test_the_compaction_read_of_an_encrypted_store_is_forwarded_after_settling(
    tmp_path: Path,
) -> None:
    """``_read_compaction_items`` (what the SDK's compaction reads through an encrypted
    store) is forwarded with the inner method's signature, and settles a pending write first:
    the read sees the replayed batch."""
    store = SQLiteSession("chat", tmp_path / "chat.db")
    faulty = FaultInjectingSession(store)
    encrypted = EncryptedSession(
        session_id="chat", underlying_session=faulty, encryption_key="k" * 32, ttl=3600
    )
    if not hasattr(encrypted, "_read_compaction_items"):
        pytest.skip("this SDK release's EncryptedSession has no _read_compaction_items")
    wrapped = ReconcilingSession(encrypted, config=ReconcileConfig(journal=tmp_path / "j.db"))
    hook: Any = wrapped._read_compaction_items  # type: ignore[attr-defined]
    assert inspect.signature(hook) == inspect.signature(encrypted._read_compaction_items)

    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await wrapped.add_items([{"role": "user", "content": "hi"}])
    assert len(await wrapped.pending()) == 1

    items, _ = await hook(None)
    assert [item["content"] for item in items] == ["hi"]
    assert await wrapped.pending() == []
