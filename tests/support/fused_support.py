"""What the tests of the one-step append (a revisioned store and its journal on one server)
share: reading the items' text, and a child process killed at a crash point of that append,
whose write must then be found whole or not at all."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

from agents_reconcile import ReconcilingSession
from agents_reconcile._core.records import Action, Outcome

__all__ = ["killed_child", "left_both_or_neither", "text"]


def text(items: list[Any]) -> list[str]:
    """Each item's content as text (a list of parts joined)."""

    def one(content: Any) -> str:
        if isinstance(content, list):
            return "".join(part.get("text", "") for part in content)
        return str(content)

    return [one(item.get("content")) for item in items]


async def killed_child(source: str, *args: str) -> None:
    """Run ``source`` in a child Python with ``args``; it must die by SIGKILL (an armed crash
    point), within a minute."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", source, *args, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode == -signal.SIGKILL, err.decode()


async def left_both_or_neither(
    session: ReconcilingSession, store: Any, outcome: Outcome | None
) -> None:
    """After the child's death, reconciling finds its one-item batch ``"one"`` appended with
    its intent (``outcome``: settled so) or neither (None: nothing to settle, nothing stored),
    and nothing stays pending."""
    decisions = await session.reconcile()
    if outcome is None:
        assert decisions == [] and await store.get_items() == []
    else:
        assert [(d.outcome, d.action) for d in decisions] == [(outcome, Action.SETTLED)]
        assert text(await store.get_items()) == ["one"]
    assert await session.pending() == []
