"""Keep a deployment up: start again whatever died, PostgreSQL included, with backoff, and touch nothing else.

Stopping the whole deployment because one component exited turned a 20 s database outage into a cancelled
training job: the dag-processor exited, the supervisor stopped everything, the running task was terminated
(and its job cancelled). Here a dead component is started again on its own, after a delay that doubles with
each quick death (1, 2, 4 ... 60 s) and starts over once it has run a minute; the others keep running. Airflow
components wait for PostgreSQL: they are not started while it is down.

A component can also hang rather than die: after a 20 s PostgreSQL outage on a loaded machine a scheduler once
kept its process but wrote nothing and scheduled nothing for an hour. The scheduler, triggerer and
dag-processor heartbeat into the database; one whose newest heartbeat is older than ``hung_after`` although
it and the database have been up that long is killed, and so started again like a dead one.

A scheduler can also stay up, heartbeat, and still schedule nothing: a running run whose row is locked by a
dead scheduler's session is skipped by every later one. The scheduler is judged by progress as well: one that
has left a running run unexamined for ``hung_after`` is killed like a hung one. The dead scheduler's session
lives on in the LocalExecutor workers it forked; once they are idle (their task done, nobody left to feed them)
they are killed, which ends that session and its locks (PostgreSQL also ends a session idle in a transaction
after a minute: ``devserver.postgres.IDLE_IN_TRANSACTION_TIMEOUT``).

``make airflow`` runs ``Supervisor.run`` in its main thread; the e2e tests run it in a background thread, so
their deployment heals the same way. ``supervise_once`` is one pass, with an injectable clock for tests.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from devserver.deployment import Deployment, _signal_group, processes_in_groups

POSTGRES = "postgres"
#: Components whose dead leader's process group is left alone: the LocalExecutor runs task processes in the
#: scheduler's group, and they finish their tasks (their retries reattach to the same job) rather than die.
#: Other groups are killed before the restart (an API server's leftover worker would keep its port).
KEEP_GROUP = frozenset({"scheduler"})


@dataclass(frozen=True)
class Backoff:
    """Delay before restart number ``failures`` of a component that keeps dying."""

    first: float = 1.0
    factor: float = 2.0
    cap: float = 60.0
    #: A component that ran this long before it died counts as healthy: its next delay is ``first`` again.
    healthy_after: float = 60.0

    def delay(self, failures: int) -> float:
        return min(self.cap, self.first * self.factor ** max(0, failures - 1))


@dataclass
class Watch:
    """What the supervisor knows of one component."""

    pid: int | None
    started: float
    failures: int = 0
    due: float | None = None  # when a dead one is started again
    restarts: int = 0


@dataclass
class Supervisor:
    deployment: Deployment
    backoff: Backoff = field(default_factory=Backoff)
    clock: Callable[[], float] = time.monotonic
    out: TextIO = sys.stdout
    #: Components not restarted for now (a test holding PostgreSQL down for a timed outage).
    held: set[str] = field(default_factory=set)
    watches: dict[str, Watch] = field(default_factory=dict)
    #: Seconds without a heartbeat after which a component that heartbeats counts as hung (its heartbeat is
    #: every few seconds; this leaves room for a loaded machine and a database that just came back).
    hung_after: float = 240.0
    #: Since when (``clock``) the database has been up without a break; None while it is down.
    db_up_since: float | None = None

    def supervise_once(self) -> list[str]:
        """One pass: notice deaths, restart what is due. Returns what it did, one line each (also printed)."""
        events: list[str] = []
        dep = self.deployment
        hangs = dep.hangs(self.hung_after) if dep.running else {}  # HTTP and a query: not under the lock
        with dep.lock:
            if not dep.running:
                return events
            pg = dep.postgres
            db_up = self._check(POSTGRES, pg.alive(), self._postmaster_pid(), pg.start, events)
            if not db_up:
                self.db_up_since = None
            elif self.db_up_since is None:
                self.db_up_since = self.clock()
            for name, proc in list(dep.procs.items()):
                alive = proc.poll() is None
                self._check(name, alive, proc.pid, lambda n=name: self._restart(n), events, ready=db_up)
            self._kill_hung(hangs, events)
            self._reap_orphaned_workers(events)
        for line in events:
            print(f"{time.strftime('%H:%M:%S')} supervisor: {line}", file=self.out, flush=True)
        return events

    def run(self, stop: threading.Event, interval: float = 1.0) -> None:
        """Supervise until ``stop`` is set; an error in one pass is reported, not fatal."""
        while not stop.wait(interval):
            try:
                self.supervise_once()
            except Exception as exc:  # noqa: BLE001 (a supervisor that dies heals nothing)
                print(f"supervisor: pass failed: {exc!r}", file=sys.stderr, flush=True)

    def _check(self, name: str, alive: bool, pid: int | None, start: Callable[[], object], events: list[str],
               *, ready: bool = True) -> bool:  # fmt: skip
        now = self.clock()
        watch = self.watches.get(name)
        if watch is None or (alive and pid != watch.pid):  # first seen, or started again by someone else
            watch = self.watches[name] = Watch(pid=pid, started=now, failures=watch.failures if watch else 0)
        if alive:
            watch.due = None
            return True
        if watch.due is None:
            ran = now - watch.started
            watch.failures = 1 if ran >= self.backoff.healthy_after else watch.failures + 1
            delay = self.backoff.delay(watch.failures)
            watch.due = now + delay
            events.append(f"{name} died after {ran:.0f} s; starting it again in {delay:.0f} s")
        if name in self.held or not ready or now < watch.due:
            return False
        try:
            start()
        except Exception as exc:  # noqa: BLE001 (PostgreSQL not starting yet: try again later)
            watch.failures += 1
            delay = self.backoff.delay(watch.failures)
            watch.due = self.clock() + delay
            events.append(f"{name} did not start ({exc}); trying again in {delay:.0f} s")
            return False
        watch.restarts += 1
        watch.due = None
        watch.started = self.clock()
        watch.pid = self._postmaster_pid() if name == POSTGRES else self.deployment.procs[name].pid
        events.append(f"{name} started again (restart {watch.restarts})")
        return name == POSTGRES

    def _kill_hung(self, hangs: dict[str, str], events: list[str]) -> None:
        """Kill each component ``Deployment.hangs`` names (no heartbeat, or a scheduler that leaves a running run
        unexamined, for ``hung_after``) while it and the database have been up at least that long; the next pass
        sees it dead and starts it again."""
        if self.db_up_since is None:
            return
        now = self.clock()
        for name, reason in hangs.items():
            proc, watch = self.deployment.procs.get(name), self.watches.get(name)
            if proc is None or watch is None or proc.poll() is not None or watch.pid != proc.pid:
                continue
            if now - max(watch.started, self.db_up_since) <= self.hung_after:
                continue
            # the scheduler's task processes finish their tasks, as when it dies on its own
            self.deployment.kill(name, group=name not in KEEP_GROUP)
            events.append(f"{name} {reason}: killed as hung")

    def _reap_orphaned_workers(self, events: list[str]) -> None:
        """Kill the idle LocalExecutor workers of schedulers that are gone: nobody hands them work any more, and
        they hold the dead scheduler's database session open (with whatever row locks it had)."""
        current = {proc.pid for proc in self.deployment.procs.values()}
        for pid in orphaned_idle_workers(self.deployment.groups - current):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                events.append(f"idle executor worker {pid} of a dead scheduler killed (it held its session)")

    def _restart(self, name: str) -> None:
        dep = self.deployment
        if name not in KEEP_GROUP:
            _signal_group(dep.procs[name].pid, signal.SIGKILL)
        dep.start_component(name)

    def _postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            return int((self.deployment.postgres.data / "postmaster.pid").read_text().split("\n", 1)[0])
        return None


#: The title Airflow's LocalExecutor gives a worker waiting for its next task (``setproctitle``).
IDLE_WORKER_TITLE = ("LocalExecutor", "<idle>")


def orphaned_idle_workers(groups: set[int]) -> list[int]:
    """Pids of the idle LocalExecutor workers in ``groups`` (process groups whose leader is gone)."""
    found = []
    for proc in processes_in_groups(groups):
        title = " ".join(proc.info["cmdline"] or [])
        if IDLE_WORKER_TITLE[0] in title and title.rstrip().endswith(IDLE_WORKER_TITLE[1]):
            found.append(proc.pid)
    return found
