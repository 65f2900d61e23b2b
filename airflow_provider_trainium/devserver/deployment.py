"""The Airflow side of the deployment: configuration, ``db migrate``, one process per component, health.

Every component runs as ``python -m airflow <component>`` in its own session, so Ctrl-C reaches only the
supervisor, which stops them in order; each writes to ``<home>/logs/<component>.log``. The configuration is
passed as environment variables, so the home's ``airflow.cfg`` (SQLite, used by ``make demo`` and the tests)
is left as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from airflow_provider_trainium.devserver.postgres import PostgresCluster, free_port, port_is_free

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
USERNAME = "admin"
DEFAULT_PASSWORD = "admin"
DEFAULT_UI_PORT = 8080
REPO = Path(__file__).resolve().parents[2]


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
        self.password = password or DEFAULT_PASSWORD
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

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    def _secrets(self) -> dict[str, str]:
        """Keys every component must share (JWTs between API server and workers, Fernet for connections)."""
        path = self.state_dir / "secrets.json"
        if not path.exists():
            from cryptography.fernet import Fernet

            keys = {"jwt": secrets.token_urlsafe(32), "secret": secrets.token_urlsafe(32),
                    "fernet": Fernet.generate_key().decode()}  # fmt: skip
            path.write_text(json.dumps(keys))
            path.chmod(0o600)
        return json.loads(path.read_text())

    def env(self) -> dict[str, str]:
        keys = self._secrets()
        passwords = self.state_dir / "passwords.json"
        passwords.write_text(json.dumps(self.passwords) + "\n")
        passwords.chmod(0o600)
        return {
            **self.base_env,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.postgres.url,
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__CORE__FERNET_KEY": keys["fernet"],
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(
                [f"{USERNAME}:admin", *(f"{name}:{role}" for name, role in self.extra_users.items())]
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__API__SECRET_KEY": keys["secret"],
            "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt"],
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.log_dir),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
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
            for component in COMPONENTS:
                self.start_component(component)
            self.write_state()
            self.wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise

    def start_component(self, component: str) -> subprocess.Popen:
        args = [component]
        if component == "api-server":
            args += ["--host", "127.0.0.1", "--port", str(self.ui_port), "--workers", "1"]
        log = open(self.log_dir / f"{component}.log", "a")  # noqa: SIM115 (kept open for the process's life)
        proc = subprocess.Popen([sys.executable, "-m", "airflow", *args], env=self.env(), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        log.close()
        self.procs[component] = proc
        self.groups.add(proc.pid)
        self.write_state()
        return proc

    def health(self) -> dict[str, str]:
        """Component -> status from ``/api/v2/monitor/health`` (empty while the API server is not up)."""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as resp:
                body = json.load(resp)
        except (urllib.error.URLError, OSError, ValueError):
            return {}
        return {name: str(part.get("status")) for name, part in body.items() if isinstance(part, dict)}

    def wait_healthy(self, timeout: float = 300, components: tuple[str, ...] = ("scheduler", "triggerer",
                                                                                "dag_processor")) -> None:  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
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
        proc = self.procs[component]
        with contextlib.suppress(ProcessLookupError):
            (os.killpg if group else os.kill)(proc.pid, sig)
        proc.wait(timeout=60)

    def restart(self, component: str, *, group: bool = True) -> None:
        """SIGKILL a component and start it again."""
        self.kill(component, group=group)
        self.start_component(component)

    def stop(self, grace: float = 30) -> None:
        """SIGTERM every component, SIGKILL what is left after ``grace`` seconds, then stop PostgreSQL."""
        for proc in self.procs.values():
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            proc.wait()
        for pgid in self.groups:  # workers left in a group, also those of killed components
            _signal_group(pgid, signal.SIGKILL)
        self.procs.clear()
        self.groups.clear()
        self.postgres.stop()
        (self.state_dir / "state.json").unlink(missing_ok=True)

    def write_state(self) -> None:
        state = {
            "supervisor": os.getpid(),
            "url": self.url,
            "pg_port": self.postgres.port,
            "components": {name: proc.pid for name, proc in self.procs.items()},
            "groups": sorted(self.groups),
        }
        (self.state_dir / "state.json").write_text(json.dumps(state, indent=2))


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def stop_recorded(home: Path, timeout: float = 60) -> bool:
    """Stop the deployment recorded in ``<home>/deployment/state.json``: ask its supervisor, or clean up for it."""
    state_file = home / "deployment" / "state.json"
    if not state_file.exists():
        return False
    state = json.loads(state_file.read_text())
    supervisor = state["supervisor"]
    if supervisor != os.getpid() and _alive(supervisor):
        os.kill(supervisor, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(supervisor) and time.monotonic() < deadline:
            time.sleep(0.5)
        if not _alive(supervisor):
            return True
    for pid in state.get("groups", state["components"].values()):  # the supervisor died without cleaning up
        _signal_group(pid, signal.SIGKILL)
    PostgresCluster(home / "deployment" / "postgres", port=state["pg_port"]).stop()
    state_file.unlink(missing_ok=True)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
