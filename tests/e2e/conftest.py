"""One ``make airflow`` deployment (PostgreSQL + API server, scheduler, DAG processor, triggerer) per session,
driven through the REST API v2 as a user or a CI system would.

Its home is ``test-artifacts/airflow-home`` (git-ignored): inside the repository because the PostgreSQL
server runs as the ``postgres`` user when the tests run as root, and pytest's temporary directories are
private to their owner. Logs and screenshots stay there for CI to keep.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devserver import Deployment
from devserver.deployment import USERNAME, stop_recorded
from devserver.supervisor import Supervisor
from tests.browser import chromium
from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
HOME = ARTIFACTS / "airflow-home"
SCREENSHOTS = ARTIFACTS / "screenshots"
TERMINAL = {"success", "failed"}
#: A trigger-only account: the simple auth manager's USER role (trigger runs, edit task instances and XComs).
TRIGGER_USER = "trigger-only"
#: The stop's grace period, as ``make airflow`` has it: the session's last stop must keep it.
STOP_GRACE = 30


class Api:
    """The REST API v2 with a JWT from ``/auth/token`` (the simple auth manager's login)."""

    def __init__(self, url: str, username: str, password: str) -> None:
        import requests

        self.url = url
        self.session = requests.Session()
        resp = self.session.post(f"{url}/auth/token", json={"username": username, "password": password}, timeout=30)
        resp.raise_for_status()
        self.session.headers["Authorization"] = f"Bearer {resp.json()['access_token']}"

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.session.request(method, f"{self.url}/api/v2/{path.lstrip('/')}", timeout=60, **kwargs)

    def get(self, path: str, **params: Any) -> Any:
        resp = self.request("GET", path, params=params)
        resp.raise_for_status()
        return resp.json()

    def unpause(self, dag_id: str) -> None:
        self.request("PATCH", f"dags/{dag_id}", json={"is_paused": False}).raise_for_status()

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> Any:
        """POST a dag run; the response, refused (HTTP 400) or not."""
        return self.request("POST", f"dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})

    def run_ids(self, dag_id: str) -> list[str]:
        return [r["dag_run_id"] for r in self.get(f"dags/{dag_id}/dagRuns", limit=100)["dag_runs"]]

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self.get(f"dags/{dag_id}/dagRuns/{run_id}")["state"]

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return self.get(f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        tis = self.get(f"dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {ti["task_id"]: ti["state"] for ti in tis}

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        return self.get(f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}",
                        deserialize=True)["value"]  # fmt: skip

    def log_entries(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> list[dict[str, Any]]:
        """A task try's structured log (each entry: ``event``, ``level``, ...)."""
        body = self.get(f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
                        full_content=True)  # fmt: skip
        return [e if isinstance(e, dict) else {"event": str(e)} for e in body["content"]]

    def log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """The log as the UI shows it: each event, and an exception's type and message after it."""
        lines = []
        for entry in self.log_entries(dag_id, run_id, task_id, try_number):
            lines.append(str(entry.get("event", "")))
            lines += [f"{e.get('exc_type')}: {e.get('exc_value')}" for e in entry.get("error_detail") or []]
        return "\n".join(lines)


#: The e2e tests' own DAGs, served beside the repository's (tests/e2e/dags).
E2E_DAGS = Path(__file__).resolve().parent / "dags"
#: The supervisor kills a scheduler that heartbeats no more, or leaves a running run unexamined, this long.
HUNG_AFTER = 120.0
#: A wait gives up on a deployment that has made no progress this long (the supervisor had its chance first):
#: the test fails at once, and the next test gets a fresh deployment.
STUCK_AFTER = 240.0
#: Every test's ceiling; a stuck deployment fails its wait long before.
TIMEOUT = 1200
MNIST = "trainium_mnist_mlp"
#: The shared MNIST run's epochs: long enough (about a minute of training on two busy cores) that the Trainium
#: view's live test sees its stream grow; the DAG's accuracy gate (MIN_ACCURACY) is fixed in the DAG file.
SHARED_EPOCHS = 100


def _order(item: pytest.Item) -> int:
    """The live test first (it watches the shared run train), then the tests that read that run once it has
    finished, then the rest (which kill components, and so find no shared run in flight)."""
    names = getattr(item, "fixturenames", ())
    if "mnist_run" in names:
        return 1
    return 0 if "mnist_run_id" in names else 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The e2e tests in ``_order`` (in the places they were collected in), each with ``TIMEOUT``."""
    slots = [i for i, item in enumerate(items) if item.path.parent.name == "e2e"]
    ordered = sorted((items[i] for i in slots), key=_order)
    for i, item in zip(slots, ordered, strict=True):
        items[i] = item
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TIMEOUT))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[pytest.TestReport]:
    """A failed test that used the deployment leaves it for a fresh one: whatever broke stays with that test."""
    report = yield
    if report.failed and "lane" in getattr(item, "fixturenames", ()) and _LANE is not None:
        _LANE.broken = f"{item.nodeid} failed"
    return report


def wait_for(condition, timeout: float, what: str, deployment: Deployment) -> Any:
    """Poll ``condition`` until it returns something truthy; fail at once when the deployment is stuck (see
    ``Deployment.stuck``), and on timeout, each time with the components' log tails."""
    deadline = time.monotonic() + timeout
    next_check = time.monotonic() + 10
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if time.monotonic() >= next_check:
            next_check = time.monotonic() + 10
            if reason := deployment.stuck(STUCK_AFTER):
                pytest.fail(f"the deployment is stuck ({reason}) while waiting for {what}\n{deployment.tail()}")
        time.sleep(1)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{deployment.tail()}")


def wait_run(api: Api, deployment: Deployment, dag_id: str, run_id: str, timeout: float = 900) -> str:
    state = wait_for(lambda: (s := api.run_state(dag_id, run_id)) in TERMINAL and s, timeout,
                     f"{dag_id} {run_id} to finish", deployment)  # fmt: skip
    return state


def dags_folder(home: Path) -> Path:
    """The deployment's DAG folder: links to the repository's DAG files and to the e2e tests' own."""
    folder = home / "dags"
    folder.mkdir(parents=True)
    for source in [*sorted((REPO / "dags").glob("*.py")), *sorted(E2E_DAGS.glob("*.py"))]:
        (folder / source.name).symlink_to(source)
    return folder


#: The module the e2e DAGs' local jobs run (tests/e2e/dags/trainium_e2e_hold.py).
JOB_MODULE = "tests.integration.jobs.count_runs"


def jobs_importable() -> None:
    """The e2e DAGs' jobs run the repository's test modules, and local compute gives a job the interpreter's own
    path, never the worker's ``PYTHONPATH`` (docs/security.md): the repository must be on that path (the editable
    install of ``make`` puts it there), or every job fails long after the deployment started."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = f"import importlib.util as u; assert u.find_spec({JOB_MODULE!r})"
    found = subprocess.run([sys.executable, "-c", probe], env=env, cwd="/", capture_output=True, text=True)
    if found.returncode != 0:
        pytest.fail(f"{sys.executable} cannot import {JOB_MODULE} without PYTHONPATH (install the repository "
                    f"editable: pip install -e .):\n{found.stderr[-2000:]}")  # fmt: skip


class Lane:
    """The deployment the e2e tests share, started on first use and supervised as ``make airflow`` does (a
    component that dies is started again, in a background thread). A test that fails marks it ``broken``: the
    next test stops it (keeping its logs under ``failed-deployment-<n>``) and gets a fresh one, so one failure
    costs one test, never the lane. ``shared`` keeps
    what tests share (the one MNIST run) for the deployment it was made on."""

    def __init__(self) -> None:
        self.supervisor: Supervisor | None = None
        self.broken: str | None = None
        self.generation = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shared: dict[str, Any] = {}
        self._apis: dict[str, Api] = {}

    def current(self) -> Supervisor:
        if self.supervisor is not None and self.broken:
            print(f"e2e: a fresh deployment after: {self.broken}")
            self.close()
            kept = ARTIFACTS / f"failed-deployment-{self.generation}"
            shutil.copytree(HOME / "logs", kept, dirs_exist_ok=True)  # the next deployment starts from an empty home
            print(f"e2e: the failed deployment's logs are in {kept}")
        if self.supervisor is None:
            self._open()
        assert self.supervisor is not None
        return self.supervisor

    def _open(self) -> None:
        jobs_importable()
        if (HOME / "deployment" / "state.json").exists():
            stop_recorded(HOME)  # an earlier session that was killed
        shutil.rmtree(HOME, ignore_errors=True)
        HOME.mkdir(parents=True)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW_VAR_"))}
        dep = Deployment(
            HOME,
            ui_port=free_port(),
            base_env=base_env,
            dags_folder=dags_folder(HOME),
            extra_env={
                # Only the runs a test creates: unpausing the @daily fine-tune DAG must not start today's run.
                "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
                # the Airflow components import the repository's modules; the DAGs' local jobs get no PYTHONPATH
                # (local compute passes none on): they import theirs from the interpreter's own path
                # (jobs_importable)
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            },
            extra_users={TRIGGER_USER: "user"},
        )
        started = time.perf_counter()
        dep.start()
        (ARTIFACTS / "deployment-start.txt").write_text(f"{time.perf_counter() - started:.1f} s\n")
        self.supervisor = Supervisor(dep, hung_after=HUNG_AFTER)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.supervisor.run, args=(self._stop,), name="supervisor",
                                        daemon=True)  # fmt: skip
        self._thread.start()
        self.generation += 1
        self.broken = None
        self._shared = {}
        self._apis = {}

    def close(self) -> float:
        """Stop the deployment; how long the stop took."""
        if self.supervisor is None:
            return 0.0
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
        started = time.perf_counter()
        self.supervisor.deployment.stop(grace=STOP_GRACE)
        self.supervisor = None
        return time.perf_counter() - started

    def api(self, username: str) -> Api:
        """The REST API as ``username``, logged in once per deployment."""
        if username not in self._apis:
            dep = self.current().deployment
            self._apis[username] = Api(dep.url, username, dep.passwords[username])
        return self._apis[username]

    def shared(self, key: str, make: Any) -> Any:
        """``make()``'s value, made once per deployment."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]


_LANE: Lane | None = None


@pytest.fixture(scope="session")
def lane() -> Iterator[Lane]:
    """The e2e tests' deployment lane; the last stop must keep its grace period (time in
    test-artifacts/deployment-stop.txt)."""
    global _LANE
    _LANE = Lane()
    try:
        yield _LANE
    finally:
        took = _LANE.close()
        _LANE = None
        (ARTIFACTS / "deployment-stop.txt").write_text(f"{took:.1f} s (grace {STOP_GRACE} s)\n")
        assert took <= STOP_GRACE + 1, f"the deployment's stop took {took:.0f} s of a {STOP_GRACE} s grace"


@pytest.fixture
def supervisor(lane: Lane) -> Supervisor:
    return lane.current()


@pytest.fixture
def deployment(supervisor: Supervisor) -> Deployment:
    return supervisor.deployment


@pytest.fixture
def api(lane: Lane, deployment: Deployment) -> Api:
    return lane.api(USERNAME)


@pytest.fixture
def user_api(lane: Lane, deployment: Deployment) -> Api:
    """The REST API as ``TRIGGER_USER`` (USER role), the account the security tests attack with."""
    return lane.api(TRIGGER_USER)


@pytest.fixture
def registry(deployment: Deployment):
    """The deployment's model registry: the embedded default artifact root, ``file://<home>/trainium``."""
    from airflow_provider_trainium.registry import ModelRegistry

    return ModelRegistry((deployment.home / "trainium").as_uri())


@pytest.fixture
def mnist_run_id(lane: Lane, api: Api) -> str:
    """The id of this deployment's one MNIST run on the DAG's success path (local compute,
    ``SHARED_EPOCHS``), triggered through the REST API by the first test that asks for it."""

    def trigger() -> str:
        api.unpause(MNIST)
        resp = api.trigger(MNIST, {"compute": "local", "epochs": SHARED_EPOCHS})
        assert resp.status_code == 200, resp.text
        return resp.json()["dag_run_id"]

    return lane.shared("mnist", trigger)


@pytest.fixture
def mnist_run(lane: Lane, api: Api, deployment: Deployment, mnist_run_id: str) -> dict[str, Any]:
    """That run, finished with success: its id, the ``train`` output URI and the registered version."""

    def finish() -> dict[str, Any]:
        state = wait_run(api, deployment, MNIST, mnist_run_id)
        assert state == "success", api.task_states(MNIST, mnist_run_id)
        return {"run_id": mnist_run_id, "output_uri": api.xcom(MNIST, mnist_run_id, "train"),
                "version": api.xcom(MNIST, mnist_run_id, "register")["version"]}  # fmt: skip

    return lane.shared("mnist-finished", finish)


def training_processes(home: Path, entry_point: str) -> list[Any]:
    """Live processes of this deployment that run ``entry_point`` (their command line names the home)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if entry_point in cmdline and str(home) in cmdline:
            found.append(proc)
    return found


def mnist_min_accuracy() -> float:
    """The MNIST DAG's promotion gate, read from the DAG file (the DAG author's setting, not a run param)."""
    import ast

    tree = ast.parse((REPO / "dags" / "trainium_mnist_mlp.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "MIN_ACCURACY" for t in node.targets):
            return float(ast.literal_eval(node.value))
    raise AssertionError("dags/trainium_mnist_mlp.py defines no MIN_ACCURACY")


# Module scope: sync Playwright runs an event loop in this thread until it closes, which later tests
# calling asyncio.run() could not share.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium driven by Playwright (its own browser download cannot work here)."""
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(browser, deployment, request) -> Iterator[Any]:
    """A page logged in through Airflow's login form; its last state is saved as a screenshot."""
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.goto(f"{deployment.url}/")
    page.locator("input[name=username]").fill(USERNAME)
    page.locator("input[name=password]").fill(deployment.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"^(?!.*/auth/login).*$"))
    page.wait_for_load_state("networkidle")
    yield page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{request.module.__name__.rsplit('.', 1)[-1]}-{request.node.name}")
    shot = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    context.close()
