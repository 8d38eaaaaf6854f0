"""Who owns an intent, and whether that owner is still alive.

An intent in flight belongs to the process that started the append. Another process may
settle it only once that owner is gone: on the same host, when its pid is dead or reused
(start time differs); elsewhere, when its lease ran out (the owner renews it while it works;
its age is read on the journal's clock). A lease that ran out proves nothing about the owner,
which may only be stalled: ``takeover`` says so (``EXPIRED``), and only a store that can refuse
the owner's late write may take the intent then.
"""

from __future__ import annotations

import enum
import getpass
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Final

__all__ = [
    "Owner",
    "Takeover",
    "current_owner",
    "default_actor",
    "holds",
    "process_state",
    "takeover",
]

_BOOT_ID_PATH: Final = "/proc/sys/kernel/random/boot_id"


@dataclass(frozen=True, slots=True)
class Owner:
    """A process: host (with boot id where known), pid, and the pid's start time; and, when it
    holds an intent, the lease it holds it under (``lease``), stamped with its claim so that
    anyone judging it (another worker, an operator's command with no deployment config) uses
    the holder's own lease length. The lease is not part of who the owner is (equality)."""

    host: str
    pid: int
    started: str
    lease: float | None = field(default=None, compare=False)
    _text: str | None = field(default=None, init=False, repr=False, compare=False)
    """``str()`` of it, made on first use: a journal writes its owner with every intent."""

    def __str__(self) -> str:
        text = self._text
        if text is None:
            base = f"{self.host}/{self.pid}/{self.started}"
            text = base if self.lease is None else f"{base}~{self.lease:g}"
            object.__setattr__(self, "_text", text)
        return text

    @classmethod
    def parse(cls, text: str) -> Owner:
        host, _, rest = text.rpartition("/")
        host, _, pid = host.rpartition("/")
        started, stamped, lease = rest.partition("~")
        return cls(
            host=host, pid=int(pid), started=started, lease=float(lease) if stamped else None
        )

    def leased(self, seconds: float) -> Owner:
        """This owner, stamped with the lease it holds what it claims under."""
        return self if self.lease == seconds else replace(self, lease=seconds)

    def lease_or(self, default: float) -> float:
        """The lease this owner stamped, else ``default`` (the judge's own configuration)."""
        return self.lease if self.lease is not None else default

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
            return age_seconds < self.lease_or(lease_seconds)
        if self.pid == me.pid:
            return self.started == me.started
        return (started_of or _process_started)(self.pid) == self.started


class Takeover(enum.Enum):
    """Whether another worker may claim an intent now."""

    HELD = "held"
    """A live owner holds it (a task here, a live process on this host, a worker on another
    host within its lease): wait for it."""
    FREE = "free"
    """Nobody holds it (failed, cancelled, or its owner is proven gone): claim it."""
    EXPIRED = "expired"
    """It is active under a worker on another host whose lease ran out: that worker may be
    dead or only stalled, and may still write. Only a store that fences writes may take it."""


def takeover(
    owner: Owner,
    *,
    active: bool,
    in_flight_here: bool,
    age_seconds: float,
    lease_seconds: float,
    me: Owner,
    started_of: Callable[[int], str | None] | None = None,
) -> Takeover:
    """Whether an intent may be claimed (see ``holds`` for the arguments; ``lease_seconds``
    counts only for an owner that did not stamp its own lease)."""
    if in_flight_here:
        return Takeover.HELD
    if not active or owner == me:
        return Takeover.FREE
    if owner.host != me.host:
        return Takeover.HELD if age_seconds < owner.lease_or(lease_seconds) else Takeover.EXPIRED
    live = owner.is_live(
        age_seconds=age_seconds, lease_seconds=lease_seconds, me=me, started_of=started_of
    )
    return Takeover.HELD if live else Takeover.FREE


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
    intent ``me`` holds in the journal but no task of mine runs is mine to take back. An
    owner elsewhere whose lease ran out holds it no more (see ``takeover`` for what that
    permits)."""
    way = takeover(
        owner,
        active=active,
        in_flight_here=in_flight_here,
        age_seconds=age_seconds,
        lease_seconds=lease_seconds,
        me=me,
        started_of=started_of,
    )
    return way is Takeover.HELD


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` from the third on (state first), or None."""
    stat = _read(f"/proc/{pid}/stat")
    # Counted from after the parenthesised command name, which may hold spaces.
    return None if stat is None else stat[stat.rfind(")") + 2 :].split()


def process_state(pid: int) -> str | None:
    """The process's state letter from ``/proc`` (``R``, ``S``, ``T`` stopped, ``Z`` exited
    and not reaped, ...), or None when it is gone or ``/proc`` cannot tell."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def _process_started(pid: int) -> str | None:
    """The pid's start time in clock ticks since boot, or None when no such process runs."""
    fields = _stat_fields(pid)
    if fields is not None:
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


def default_actor() -> str:
    """Who resolves when nobody says: this user on this host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (some containers)
        user = str(current_owner().pid)
    return f"{user}@{socket.gethostname()}"
