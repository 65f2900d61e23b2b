"""The Airflow side of the deployment: configuration, ``db migrate``, one process per component, health.

Every component runs as ``python -m airflow <component>`` in its own session, so Ctrl-C reaches only the
supervisor, which stops them in order; each writes to ``<home>/logs/<component>.log``. The configuration is
passed as environment variables, so the home's ``airflow.cfg`` (SQLite, used by ``make demo`` and the tests)
is left as it is.

Every listener is on 127.0.0.1, on ports picked free for this deployment, so two deployments share a host:
Airflow's own log servers (scheduler, triggerer) bind every interface, so they are skipped and one
``log-server`` component serves the shared log folder (Airflow's log server app under uvicorn) for both.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from airflow_provider_trainium.plugins.host_check import ALLOWED_HOSTS_ENV
from devserver.postgres import PostgresCluster, free_port, pid_alive, port_is_free
from devserver.private_files import write_private

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer", "log-server")
#: Component -> its part of the health endpoint's answer, which holds ``latest_<part>_heartbeat``.
HEARTBEAT_PARTS = {"scheduler": "scheduler", "triggerer": "triggerer", "dag-processor": "dag_processor"}
USERNAME = "admin"
OLD_DEFAULT_PASSWORD = "admin"
DEFAULT_UI_PORT = 8080
LOOPBACK = "127.0.0.1"
#: ``[core] hostname_callable``: task instances and triggerer jobs record 127.0.0.1 as their host, so the API
#: server fetches their logs from the loopback-only log server.
HOSTNAME_CALLABLE = "airflow_provider_trainium.plugins.host_check.loopback"
#: How much of a stop's grace PostgreSQL's own shutdown gets (the rest goes to the Airflow components).
PG_STOP_SHARE = 0.25
REPO = Path(__file__).resolve().parents[1]


class Deployment:
    """PostgreSQL plus the four Airflow components on one Airflow home; ``start()`` returns once all are healthy."""

    def __init__(
        self,
        home: Path,
        *,
        ui_port: int | None = None,
        pg_port: int | None = None,
        password: str | None = None,
        dags_folder: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
        base_env: Mapping[str, str] | None = None,
        extra_users: Mapping[str, str] | None = None,
    ) -> None:
        self.home = home.resolve()
        self.state_dir = self.home / "deployment"
        self.log_dir = self.home / "logs"
        if ui_port is None:
            ui_port = DEFAULT_UI_PORT if port_is_free(DEFAULT_UI_PORT) else free_port()
        self.ui_port = ui_port
        self.log_port = free_port()
        self.health_port = free_port()
        self.passwords_file = self.state_dir / "passwords.json"
        #: True when no password was given or kept from an earlier start: ``make airflow`` prints it once.
        self.password_generated = False
        self.password = password or self._kept_password() or self._new_password()
        #: username -> simple auth manager role (``viewer``, ``user``, ``op``...) besides the admin; each
        #: gets a random password, kept in ``passwords``.
        self.extra_users = dict(extra_users or {})
        self.passwords = {USERNAME: self.password, **{name: secrets.token_urlsafe(16) for name in self.extra_users}}
        self.dags_folder = dags_folder or REPO / "dags"
        self.postgres = PostgresCluster(
            self.state_dir / "postgres", port=pg_port, log_file=self.log_dir / "postgres.log"
        )
        self.extra_env = dict(extra_env or {})
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.procs: dict[str, subprocess.Popen] = {}
        self.groups: set[int] = set()  # every process group started, killed ones' leftovers included
        #: Held while components are started, killed or stopped, so a supervisor never sees a half-done restart.
        self.lock = threading.RLock()
        #: Between a finished ``start()`` and ``stop()``: only then does a supervisor restart what died.
        self.running = False

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.ui_port}"

    def _kept_password(self) -> str | None:
        """The admin password of an earlier start of this home (``passwords.json``), if any; not the old
        default ``admin`` that homes made before random passwords still hold."""
        try:
            kept = json.loads(self.passwords_file.read_text()).get(USERNAME)
        except (OSError, ValueError, AttributeError):
            return None
        return kept if kept and kept != OLD_DEFAULT_PASSWORD else None

    def _new_password(self) -> str:
        self.password_generated = True
        return secrets.token_urlsafe(16)

    def _secrets(self) -> dict[str, str]:
        """Keys every component must share (JWTs between API server and workers, Fernet for connections)."""
        path = self.state_dir / "secrets.json"
        if not path.exists():
            from cryptography.fernet import Fernet

            keys = {"jwt": secrets.token_urlsafe(32), "secret": secrets.token_urlsafe(32),
                    "fernet": Fernet.generate_key().decode()}  # fmt: skip
            self.state_dir.mkdir(parents=True, exist_ok=True)
            write_private(path, json.dumps(keys))
        return json.loads(path.read_text())

    def allowed_hosts(self) -> list[str]:
        """The ``Host`` headers the API server answers: this deployment's own addresses, nothing a DNS name
        rebound to 127.0.0.1 would send."""
        return [f"{LOOPBACK}:{self.ui_port}", f"localhost:{self.ui_port}"]

    def env(self) -> dict[str, str]:
        keys = self._secrets()
        write_private(self.passwords_file, json.dumps(self.passwords) + "\n")
        return {
            **self.base_env,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.postgres.url,
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            # it runs a triggerer: remote jobs wait there unless a task says deferrable=False
            "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",
            "AIRFLOW__CORE__FERNET_KEY": keys["fernet"],
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(
                [f"{USERNAME}:admin", *(f"{name}:{role}" for name, role in self.extra_users.items())]
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.passwords_file),
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": HOSTNAME_CALLABLE,
            "AIRFLOW__API__SECRET_KEY": keys["secret"],
            "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt"],
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.log_dir),
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.log_port),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(self.log_port),
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": LOOPBACK,
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(self.health_port),
            ALLOWED_HOSTS_ENV: ",".join(self.allowed_hosts()),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
            # for the components' own processes: a local job inherits neither (local compute gives an XLA job
            # PJRT_DEVICE=CPU itself; compute/local/environment.py and docs/security.md say what a job keeps)
            "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU"),
            "TOKENIZERS_PARALLELISM": "false",
            **self.extra_env,
        }

    def airflow(self, *args: str, timeout: float = 600) -> str:
        """Run an ``airflow`` CLI command against this deployment; its output, or an error with it."""
        done = subprocess.run([sys.executable, "-m", "airflow", *args], env=self.env(), capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        return done.stdout

    def start(self, timeout: float = 300) -> None:
        """PostgreSQL, ``db migrate``, then every component; returns once the health endpoint reports all healthy."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.postgres.init()
        self.postgres.start()
        try:
            self.airflow("db", "migrate")
            with self.lock:
                for component in COMPONENTS:
                    self.start_component(component)
            self.write_state()
            self.wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        self.running = True

    def command(self, component: str) -> list[str]:
        """The component's command line; every listener on 127.0.0.1."""
        if component == "log-server":
            return [sys.executable, "-m", "uvicorn", "airflow.utils.serve_logs.log_server:get_app", "--factory",
                    "--host", LOOPBACK, "--port", str(self.log_port), "--no-access-log"]  # fmt: skip
        args = [component]
        if component == "api-server":
            args += ["--host", LOOPBACK, "--port", str(self.ui_port), "--workers", "1"]
        elif component in ("scheduler", "triggerer"):
            args += ["--skip-serve-logs"]  # their log servers bind every interface: the log-server serves both
        return [sys.executable, "-m", "airflow", *args]

    def start_component(self, component: str) -> subprocess.Popen:
        with self.lock:
            log = open(self.log_dir / f"{component}.log", "a")  # noqa: SIM115 (kept open for the process's life)
            proc = subprocess.Popen(self.command(component), env=self.env(), stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # fmt: skip
            log.close()
            self.procs[component] = proc
            self.groups.add(proc.pid)
            self.write_state()
            return proc

    def _health_body(self) -> dict:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as resp:
                body = json.load(resp)
        except (urllib.error.URLError, OSError, ValueError):
            return {}
        return body if isinstance(body, dict) else {}

    def health(self) -> dict[str, str]:
        """Component -> status from ``/api/v2/monitor/health`` (empty while the API server is not up)."""
        return {name: str(part.get("status")) for name, part in self._health_body().items() if isinstance(part, dict)}

    def heartbeat_ages(self) -> dict[str, float]:
        """Component -> seconds since its newest job's heartbeat in the database, for the components that
        heartbeat (scheduler, triggerer, dag-processor); empty while the API server or the database is down,
        since then a stale heartbeat says nothing about the component."""
        body = self._health_body()
        if (body.get("metadatabase") or {}).get("status") != "healthy":
            return {}
        now = datetime.now(UTC)
        ages = {}
        for component, part in HEARTBEAT_PARTS.items():
            beat = (body.get(part) or {}).get(f"latest_{part}_heartbeat")
            with contextlib.suppress(TypeError, ValueError):
                ages[component] = (now - datetime.fromisoformat(beat)).total_seconds()
        return ages

    def scheduling_lags(self) -> dict[str, float]:
        """``dag_id/run_id`` -> seconds since the scheduler last examined that running run, for every running run
        of an unpaused DAG. A working scheduler examines each of them every loop (``last_scheduling_decision``),
        so a lag of minutes means runs left waiting by a scheduler that still heartbeats. Empty while the
        database does not answer."""
        rows = self.postgres.query(
            "SELECT dr.dag_id, dr.run_id, EXTRACT(EPOCH FROM now() - COALESCE(dr.last_scheduling_decision, "
            "dr.start_date, dr.queued_at)) FROM dag_run dr JOIN dag d ON d.dag_id = dr.dag_id "
            "WHERE dr.state = 'running' AND NOT d.is_paused AND NOT d.is_stale AND dr.run_after <= now()"
        )
        return {f"{dag_id}/{run_id}": float(lag) for dag_id, run_id, lag in rows or () if lag is not None}

    def hangs(self, after: float) -> dict[str, str]:
        """Component -> why it has made no progress for ``after`` seconds: no heartbeat (scheduler, triggerer,
        DAG processor), or, for the scheduler, a running run it no longer examines. Empty while the API server
        or the database does not answer: an outage is not a hang."""
        ages = self.heartbeat_ages()
        found = {name: f"sent no heartbeat for {age:.0f} s" for name, age in ages.items() if age > after}
        stalled = {run: lag for run, lag in (self.scheduling_lags() if ages else {}).items() if lag > after}
        if stalled and "scheduler" not in found:
            run, lag = max(stalled.items(), key=lambda item: item[1])
            found["scheduler"] = f"left the running run {run} unexamined for {lag:.0f} s"
        return found

    def stuck(self, after: float) -> str | None:
        """Why this deployment cannot make progress, if it has not for ``after`` seconds (``hangs``); else None."""
        return next((f"{name} {why}" for name, why in self.hangs(after).items()), None)

    def wait_healthy(self, timeout: float = 300, components: tuple[str, ...] = ("scheduler", "triggerer",
                     "dag_processor"), *, exit_fails: bool = True) -> None:  # fmt: skip
        """Until the health endpoint reports the database and ``components`` healthy; a component that exits
        meanwhile fails it, unless ``exit_fails`` is off (a supervisor restarts it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in list(self.procs.items()):
                if exit_fails and proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.tail(name)}")
            status = self.health()
            if status and all(status.get(c) == "healthy" for c in ("metadatabase", *components)):
                return
            time.sleep(1)
        raise TimeoutError(f"not healthy after {timeout:.0f} s: {self.health()}\n" + self.tail())

    def tail(self, *components: str, lines: int = 25) -> str:
        parts = []
        for name in components or COMPONENTS:
            path = self.log_dir / f"{name}.log"
            if path.exists():
                parts.append(f"--- {name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(parts)

    def kill(self, component: str, sig: int = signal.SIGKILL, *, group: bool = True) -> None:
        """Signal a component: its whole process group, or (``group=False``) only its main process, as when
        the scheduler alone dies and the LocalExecutor's workers keep running their tasks."""
        with self.lock:
            proc = self.procs[component]
            with contextlib.suppress(ProcessLookupError):
                (os.killpg if group else os.kill)(proc.pid, sig)
            proc.wait(timeout=60)

    def restart(self, component: str, *, group: bool = True) -> None:
        """SIGKILL a component and start it again (under the lock: a supervisor sees neither step alone)."""
        with self.lock:
            self.kill(component, group=group)
            self.start_component(component)

    def stop(self, grace: float = 30) -> None:
        """Stop everything within ``grace`` seconds: SIGTERM every component, SIGKILL every process group still
        there at one deadline, then PostgreSQL's fast shutdown in the last ``PG_STOP_SHARE`` of the grace."""
        started = time.monotonic()
        with self.lock:
            self.running = False
            for proc in self.procs.values():
                if proc.poll() is None:
                    _signal_group(proc.pid, signal.SIGTERM)
            deadline = started + grace * (1 - PG_STOP_SHARE)
            for proc in self.procs.values():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            for pgid in self.groups:  # what ignored SIGTERM, workers left in a group, killed components' leftovers
                _signal_group(pgid, signal.SIGKILL)
            for proc in self.procs.values():  # reap the components
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.1, deadline + 1 - time.monotonic()))
            _wait_groups_gone(self.groups, deadline + 1)
            self.procs.clear()
            self.groups.clear()
            self.postgres.stop(timeout=max(1.0, started + grace - time.monotonic()))
            (self.state_dir / "state.json").unlink(missing_ok=True)

    def write_state(self) -> None:
        state = {
            "supervisor": os.getpid(),
            "url": self.url,
            "pg_port": self.postgres.port,
            "components": {name: proc.pid for name, proc in self.procs.items()},
            "groups": sorted(self.groups),
        }
        with self.lock:
            (self.state_dir / "state.json").write_text(json.dumps(state, indent=2))


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def processes_in_groups(groups: set[int]) -> list:
    """The processes (``psutil.Process``, with ``status`` and ``cmdline`` read) of the process groups ``groups``."""
    import psutil

    if not groups:
        return []
    found = []
    for proc in psutil.process_iter(["status", "cmdline"]):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(proc.pid) in groups:
                found.append(proc)
    return found


def _wait_groups_gone(groups: set[int], until: float) -> None:
    """Wait, until the ``time.monotonic()`` ``until``, for every process of the SIGKILLed ``groups`` to exit:
    ``killpg`` returns before its targets die, and one tearing down a large memory (or on a busy host) still
    runs, holding its ports and files, for a while after (only the components themselves are waited for)."""
    import psutil

    running = [proc for proc in processes_in_groups(groups) if proc.info["status"] != psutil.STATUS_ZOMBIE]
    psutil.wait_procs(running, timeout=max(0.0, until - time.monotonic()))


def stop_recorded(home: Path, timeout: float = 60) -> bool:
    """Stop the deployment recorded in ``<home>/deployment/state.json``: ask its supervisor, or clean up for it."""
    state_file = home / "deployment" / "state.json"
    if not state_file.exists():
        return False
    state = json.loads(state_file.read_text())
    supervisor = state["supervisor"]
    if supervisor != os.getpid() and pid_alive(supervisor):
        os.kill(supervisor, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(supervisor) and time.monotonic() < deadline:
            time.sleep(0.5)
        if not pid_alive(supervisor):
            return True
    for pid in state.get("groups", state["components"].values()):  # the supervisor died without cleaning up
        _signal_group(pid, signal.SIGKILL)
    PostgresCluster(home / "deployment" / "postgres", port=state["pg_port"]).stop()
    state_file.unlink(missing_ok=True)
    return True
