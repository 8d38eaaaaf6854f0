"""Who owns an intent, and whether that owner is still alive.

An intent in flight belongs to the process that started the append. Another process may
settle it only once that owner is gone: on the same host, when its pid is dead or reused
(start time differs); elsewhere, when the intent is older than the lease time.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Final

__all__ = ["Owner", "current_owner", "holds"]

_BOOT_ID_PATH: Final = "/proc/sys/kernel/random/boot_id"


@dataclass(frozen=True, slots=True)
class Owner:
    """A process: host (with boot id where known), pid, and the pid's start time."""

    host: str
    pid: int
    started: str

    def __str__(self) -> str:
        return f"{self.host}/{self.pid}/{self.started}"

    @classmethod
    def parse(cls, text: str) -> Owner:
        host, _, rest = text.rpartition("/")
        host, _, pid = host.rpartition("/")
        return cls(host=host, pid=int(pid), started=rest)

    def is_live(
        self,
        *,
        age_seconds: float,
        lease_seconds: float,
        me: Owner | None = None,
        started_of: Callable[[int], str | None] | None = None,
    ) -> bool:
        """Whether this owner may still finish what it started: elsewhere, while what it holds
        is younger than the lease; on this host (``me``'s), while its pid runs with the start
        time it had (``started_of(pid)``, read from ``/proc`` unless given)."""
        me = me if me is not None else current_owner()
        if self.host != me.host:
            return age_seconds < lease_seconds
        if self.pid == me.pid:
            return self.started == me.started
        return (started_of or _process_started)(self.pid) == self.started


def holds(
    owner: Owner,
    *,
    active: bool,
    in_flight_here: bool,
    age_seconds: float,
    lease_seconds: float,
    me: Owner,
    started_of: Callable[[int], str | None] | None = None,
) -> bool:
    """Whether an intent is held by a live owner, so it is not another's to settle yet.

    ``in_flight_here``: a task of this process is appending or reconciling it. ``active``: its
    state is in flight or reconciling (a failed or cancelled intent is held by nobody). An
    intent ``me`` holds in the journal but no task of mine runs is mine to take back."""
    if in_flight_here:
        return True
    if not active or owner == me:
        return False
    return owner.is_live(
        age_seconds=age_seconds, lease_seconds=lease_seconds, me=me, started_of=started_of
    )


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _process_started(pid: int) -> str | None:
    """The pid's start time in clock ticks since boot, or None when no such process runs."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is not None:
        # Field 22 counts from after the parenthesised command name, which may hold spaces.
        fields = stat[stat.rfind(")") + 2 :].split()
        # A zombie has exited; it only waits for its parent to reap it.
        if not fields or fields[0] in ("Z", "X"):
            return None
        return fields[19] if len(fields) > 19 else None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return "unknown"
    return "unknown"


@cache
def _current(pid: int) -> Owner:
    # Without a boot id, the host name alone: pids are still compared on this host.
    boot = _read(_BOOT_ID_PATH)
    started = _process_started(pid)
    return Owner(
        host=f"{socket.gethostname()}#{boot[:8]}" if boot else socket.gethostname(),
        pid=pid,
        started=started if started is not None else uuid.uuid4().hex,
    )


def current_owner() -> Owner:
    """This process (re-derived after a fork)."""
    return _current(os.getpid())
