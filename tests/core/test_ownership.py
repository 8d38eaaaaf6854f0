"""Owner liveness: who may still finish an in-flight write."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from agents_reconcile._core.ownership import Owner, _process_started, current_owner


def test_this_process_is_live_and_round_trips() -> None:
    """The current owner is live, and its text form parses back to itself."""
    me = current_owner()
    assert Owner.parse(str(me)) == me
    assert me.is_live(age_seconds=10_000, lease_seconds=1)


def test_a_running_child_is_live_and_an_exited_one_is_not() -> None:
    """A live pid with its start time is live; once it exits, even unreaped, it is not."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = _process_started(child.pid)
        assert started is not None
        owner = Owner(host=current_owner().host, pid=child.pid, started=started)
        assert owner.is_live(age_seconds=0, lease_seconds=1)
        os.kill(child.pid, 9)
        deadline = time.monotonic() + 5
        while _process_started(child.pid) is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        # Not reaped yet: a zombie, which must already count as gone.
        assert not owner.is_live(age_seconds=0, lease_seconds=1)
    finally:
        child.kill()
        child.wait()


def test_a_reused_pid_is_not_the_same_owner() -> None:
    """A pid whose start time differs from the recorded one belongs to another process."""
    me = current_owner()
    stranger = Owner(host=me.host, pid=me.pid, started="0")
    assert not stranger.is_live(age_seconds=0, lease_seconds=1)


def test_owners_elsewhere_live_for_the_lease() -> None:
    """An owner on another host is presumed live only while its intent is younger than the lease."""
    remote = Owner(host="elsewhere#1", pid=1, started="1")
    assert remote.is_live(age_seconds=1, lease_seconds=30)
    assert not remote.is_live(age_seconds=31, lease_seconds=30)


def test_who_holds_an_intent() -> None:
    """Held: by a task of this process; by a live owner while active; never when failed or
    cancelled, nor by me outside a task; elsewhere only within the lease (no /proc read)."""
    from agents_reconcile._core.ownership import holds

    me = Owner(host="here#1", pid=10, started="100")
    neighbour = Owner(host="here#1", pid=11, started="200")
    remote = Owner(host="there#2", pid=11, started="200")
    running = {11: "200"}

    def ask(owner: Owner, *, active: bool = True, here: bool = False, age: float = 0) -> bool:
        return holds(
            owner,
            active=active,
            in_flight_here=here,
            age_seconds=age,
            lease_seconds=30,
            me=me,
            started_of=running.get,
        )

    assert ask(me, active=False, here=True)
    assert not ask(me)
    assert ask(neighbour)
    assert not ask(neighbour, active=False)
    assert not ask(Owner(host="here#1", pid=11, started="199"))
    assert not ask(Owner(host="here#1", pid=12, started="1"))
    assert ask(remote, age=29)
    assert not ask(remote, age=31)
