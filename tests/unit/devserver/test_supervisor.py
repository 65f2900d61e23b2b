"""The supervisor starts again what died, alone, after a delay that doubles while it keeps dying."""

from __future__ import annotations

import io
import os
import signal
import time
from datetime import UTC, datetime, timedelta

import pytest

from devserver.supervisor import POSTGRES, Backoff, Supervisor
from tests.unit.devserver.conftest import QUICK_DEATH, STUBBORN
from tests.unit.devserver.test_deployment_stop import gone

pytestmark = pytest.mark.process  # every test here starts processes


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def supervisor(dep, clock: Clock) -> Supervisor:
    return Supervisor(dep, clock=clock, out=io.StringIO())


def test_a_dead_component_is_started_again_after_its_delay_and_the_others_are_left_alone(make_deployment):
    dep = make_deployment()
    clock = Clock()
    sup = supervisor(dep, clock)
    assert sup.supervise_once() == []
    scheduler, triggerer = dep.procs["scheduler"].pid, dep.procs["triggerer"].pid
    dep.kill("triggerer")
    events = sup.supervise_once()
    assert events == ["triggerer died after 0 s; starting it again in 1 s"]
    assert dep.procs["triggerer"].poll() is not None  # not before its delay
    clock.now += 1
    assert sup.supervise_once() == ["triggerer started again (restart 1)"]
    assert dep.procs["triggerer"].pid != triggerer and dep.procs["triggerer"].poll() is None
    assert dep.procs["scheduler"].pid == scheduler and dep.procs["scheduler"].poll() is None


def test_the_delay_doubles_up_to_its_cap_and_starts_over_after_a_healthy_run(make_deployment):
    dep = make_deployment({"dag-processor": QUICK_DEATH}, "dag-processor")
    clock = Clock()
    sup = supervisor(dep, clock)
    sup.backoff = Backoff(first=1, factor=2, cap=8, healthy_after=60)
    delays = []
    for _ in range(5):
        dep.procs["dag-processor"].wait()
        sup.supervise_once()
        delays.append(sup.watches["dag-processor"].due - clock.now)
        clock.now += delays[-1]
        assert sup.supervise_once()[-1].startswith("dag-processor started again")
    assert delays == [1, 2, 4, 8, 8]
    clock.now += 61  # this start "ran" a minute before dying: healthy, so the next delay is the first again
    dep.procs["dag-processor"].wait()
    sup.supervise_once()
    assert sup.watches["dag-processor"].due - clock.now == 1


def test_postgres_is_started_again_first_and_components_wait_for_it(make_deployment):
    dep = make_deployment()
    clock = Clock()
    sup = supervisor(dep, clock)
    sup.supervise_once()
    sup.held.add(POSTGRES)  # a timed outage: the database stays down while held
    dep.postgres.up = False
    dep.kill("scheduler")
    sup.supervise_once()  # both deaths noticed
    clock.now += 100
    events = sup.supervise_once()
    assert dep.procs["scheduler"].poll() is not None, events  # no scheduler while the database is down
    assert dep.postgres.starts == 0
    sup.held.clear()
    events = sup.supervise_once()
    assert dep.postgres.starts == 1
    assert events[-2:] == ["postgres started again (restart 1)", "scheduler started again (restart 1)"]
    assert dep.procs["scheduler"].poll() is None


def test_a_database_that_does_not_start_is_tried_again_later(make_deployment):
    dep = make_deployment()
    clock = Clock()
    sup = supervisor(dep, clock)
    sup.supervise_once()

    def refuse() -> None:
        raise RuntimeError("port in use")

    dep.postgres.up = False
    dep.postgres.start = refuse
    clock.now += 1
    sup.supervise_once()
    clock.now += 1
    assert sup.supervise_once() == ["postgres did not start (port in use); trying again in 2 s"]
    assert sup.supervise_once() == []  # not before its delay


def test_a_deployment_being_stopped_is_not_healed(make_deployment):
    dep = make_deployment()
    clock = Clock()
    sup = supervisor(dep, clock)
    sup.supervise_once()
    dep.kill("triggerer")
    dep.running = False
    clock.now += 100
    assert sup.supervise_once() == []
    assert dep.procs["triggerer"].poll() is not None


def stale(dep, **ages: float) -> None:
    """The health endpoint's heartbeat ages, as ``Deployment.heartbeat_ages`` reads them."""
    dep.heartbeat_ages = lambda: {name.replace("_", "-"): age for name, age in ages.items()}


def test_a_component_without_a_heartbeat_for_hung_after_is_killed_and_started_again(make_deployment):
    dep = make_deployment({"scheduler": STUBBORN}, "scheduler", "triggerer")
    clock = Clock()
    sup = supervisor(dep, clock)
    sup.hung_after = 240
    sup.supervise_once()
    scheduler, triggerer = dep.procs["scheduler"].pid, dep.procs["triggerer"].pid
    child_file = dep.state_dir / "scheduler.child"
    while not child_file.exists() or not child_file.read_text():  # the scheduler reports its task process
        assert dep.procs["scheduler"].poll() is None, dep.tail("scheduler")
        time.sleep(0.05)
    child = int(child_file.read_text())
    stale(dep, scheduler=300, triggerer=3)
    clock.now += 241
    assert sup.supervise_once() == ["scheduler sent no heartbeat for 300 s: killed as hung"]
    assert dep.procs["scheduler"].poll() is not None
    assert not gone(child), "the scheduler's task processes (its group) are left to finish their tasks"
    stale(dep)
    assert sup.supervise_once() == ["scheduler died after 241 s; starting it again in 1 s"]
    clock.now += 1
    assert sup.supervise_once() == ["scheduler started again (restart 1)"]
    assert dep.procs["scheduler"].pid != scheduler and dep.procs["scheduler"].poll() is None
    assert dep.procs["triggerer"].pid == triggerer and dep.procs["triggerer"].poll() is None
    os.kill(child, signal.SIGKILL)


def test_a_scheduler_that_heartbeats_but_leaves_a_running_run_unexamined_is_killed_as_hung(make_deployment):
    """The row-lock hang: the scheduler is up and heartbeats, but a running run is never examined again."""
    dep = make_deployment()
    clock = Clock()
    sup = supervisor(dep, clock)
    sup.hung_after = 240
    sup.supervise_once()
    stale(dep, scheduler=2, triggerer=2)
    dep.postgres.rows = [("mnist", "manual__1", 100.0)]
    clock.now += 241
    assert sup.supervise_once() == []  # examined 100 s ago: a slow loop, not a hang
    dep.postgres.rows = [("mnist", "manual__1", 300.0)]
    assert sup.supervise_once() == [
        "scheduler left the running run mnist/manual__1 unexamined for 300 s: killed as hung"
    ]
    assert dep.procs["scheduler"].poll() is not None and dep.procs["triggerer"].poll() is None


def test_a_dead_schedulers_idle_executor_workers_are_killed_and_busy_ones_left_to_finish(make_deployment):
    """They hold the dead scheduler's database session (and its row locks) open; nobody hands them work."""
    title = "import setproctitle, sys, time; setproctitle.setproctitle(sys.argv[1]); time.sleep(600)"
    idle = "airflow worker -- LocalExecutor: <idle>"
    busy = "airflow worker -- LocalExecutor: 01a2-train"
    script = f"""
import subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", {title!r}, t]) for t in ({idle!r}, {busy!r})]
open(sys.argv[1], "w").write(" ".join(str(k.pid) for k in kids))
time.sleep(600)
"""
    dep = make_deployment({"scheduler": script}, "scheduler")
    sup = supervisor(dep, Clock())
    child_file = dep.state_dir / "scheduler.child"
    while not child_file.exists() or not child_file.read_text():
        time.sleep(0.05)
    idle_pid, busy_pid = map(int, child_file.read_text().split())
    dep.restart("scheduler", group=False)  # the scheduler dies; its workers stay in its group
    deadline = time.monotonic() + 30
    events: list[str] = []
    while not events and time.monotonic() < deadline:  # until the idle worker's title is set
        events = [e for e in sup.supervise_once() if "idle executor worker" in e]
        time.sleep(0.1)
    assert events == [f"idle executor worker {idle_pid} of a dead scheduler killed (it held its session)"]
    deadline = time.monotonic() + 30
    while not gone(idle_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(idle_pid) and not gone(busy_pid)
    os.kill(busy_pid, signal.SIGKILL)


def test_a_stale_heartbeat_is_not_hung_until_the_component_and_the_database_have_been_up_that_long(
    make_deployment,
):
    dep = make_deployment()
    clock = Clock()
    sup = supervisor(dep, clock)
    sup.supervise_once()
    stale(dep, scheduler=1000, triggerer=1000, dag_processor=1000)  # no dag-processor in this deployment
    clock.now += 100
    assert sup.supervise_once() == []  # started 100 s ago: its first heartbeat may still be coming
    dep.postgres.up = False
    sup.held.add(POSTGRES)
    clock.now += 200
    sup.supervise_once()
    sup.held.clear()
    clock.now += 1
    assert sup.supervise_once()[-1] == "postgres started again (restart 1)"
    clock.now += 200
    assert sup.supervise_once() == []  # the database is back for 200 s only: heartbeats have had no time
    clock.now += 41
    events = sup.supervise_once()
    hung = [f"{name} sent no heartbeat for 1000 s: killed as hung" for name in ("scheduler", "triggerer")]
    assert sorted(events) == hung


def test_heartbeat_ages_come_from_the_health_endpoint_and_only_while_the_database_answers(make_deployment):
    dep = make_deployment()
    beat = (datetime.now(UTC) - timedelta(seconds=90)).isoformat()
    body = {
        "metadatabase": {"status": "healthy"},
        "scheduler": {"status": "unhealthy", "latest_scheduler_heartbeat": beat},
        "triggerer": {"status": None, "latest_triggerer_heartbeat": None},
        "dag_processor": {"status": "healthy", "latest_dag_processor_heartbeat": beat},
    }
    dep._health_body = lambda: body
    ages = dep.heartbeat_ages()
    assert set(ages) == {"scheduler", "dag-processor"}  # no triggerer job yet: nothing to judge
    assert all(90 <= age < 120 for age in ages.values()), ages
    body["metadatabase"]["status"] = "unhealthy"
    assert dep.heartbeat_ages() == {}
