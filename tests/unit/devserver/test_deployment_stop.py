"""``Deployment.stop(grace)`` returns within its grace, whatever ignores SIGTERM, with nothing left running."""

from __future__ import annotations

import time

import psutil
import pytest

from tests.unit.devserver.conftest import STUBBORN

pytestmark = pytest.mark.process  # every test here starts processes


def gone(pid: int) -> bool:
    """Exited: no such process, or one only its parent's (or init's) wait is left of."""
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return True


def test_stop_is_bounded_by_its_grace_and_kills_what_ignores_sigterm(make_deployment):
    dep = make_deployment({"scheduler": STUBBORN, "triggerer": STUBBORN})
    children = {}
    for name in ("scheduler", "triggerer"):
        path = dep.state_dir / f"{name}.child"
        while not path.exists() or not path.read_text():  # the component reports its child's pid
            assert dep.procs[name].poll() is None, dep.tail(name)
            time.sleep(0.05)
        children[name] = int(path.read_text())
    pids = [p.pid for p in dep.procs.values()] + list(children.values())
    started = time.monotonic()
    dep.stop(grace=3)
    elapsed = time.monotonic() - started
    # the grace plus a bound for the SIGKILLs and PostgreSQL's fast stop (an unbounded stop waits for ever)
    assert elapsed < 6, f"stop(grace=3) took {elapsed:.1f} s"
    # stop() waits for what it SIGKILLed to exit (a child tearing down its memory still runs after killpg)
    assert all(gone(pid) for pid in pids), [p for p in pids if not gone(p)]
    assert dep.procs == {} and not (dep.state_dir / "state.json").exists()
