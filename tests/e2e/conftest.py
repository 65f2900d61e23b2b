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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Whole DAG runs on a busy 2-core machine outlast the suite's 15-minute per-test default (which also
    covers starting the deployment in the first test)."""
    for item in items:
        if item.path.parent.name == "e2e" and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(2400))


def wait_for(condition, timeout: float, what: str, deployment: Deployment) -> Any:
    """Poll ``condition`` until it returns something truthy; on timeout fail with the components' log tails."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(1)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{deployment.tail()}")


def wait_run(api: Api, deployment: Deployment, dag_id: str, run_id: str, timeout: float = 900) -> str:
    state = wait_for(lambda: (s := api.run_state(dag_id, run_id)) in TERMINAL and s, timeout,
                     f"{dag_id} {run_id} to finish", deployment)  # fmt: skip
    return state


@pytest.fixture(scope="package")
def supervisor() -> Iterator[Supervisor]:
    """The deployment, started once and supervised as ``make airflow`` does (a component that dies is started
    again, in a background thread); the start time goes to test-artifacts/deployment-start.txt, and the last
    stop must keep its grace period."""
    if (HOME / "deployment" / "state.json").exists():
        stop_recorded(HOME)  # an earlier session that was killed
    shutil.rmtree(HOME, ignore_errors=True)
    HOME.mkdir(parents=True)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW_VAR_"))}
    dep = Deployment(
        HOME,
        ui_port=free_port(),
        base_env=base_env,
        extra_env={
            # Only the runs a test creates: unpausing the @daily fine-tune DAG must not start today's run.
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        },
        extra_users={TRIGGER_USER: "user"},
    )
    started = time.perf_counter()
    dep.start()
    (ARTIFACTS / "deployment-start.txt").write_text(f"{time.perf_counter() - started:.1f} s\n")
    sup = Supervisor(dep)
    stop = threading.Event()
    thread = threading.Thread(target=sup.run, args=(stop,), name="supervisor", daemon=True)
    thread.start()
    try:
        yield sup
    finally:
        stop.set()
        thread.join(timeout=120)
        started = time.perf_counter()
        dep.stop(grace=STOP_GRACE)
        took = time.perf_counter() - started
        (ARTIFACTS / "deployment-stop.txt").write_text(f"{took:.1f} s (grace {STOP_GRACE} s)\n")
        assert took <= STOP_GRACE + 1, f"the deployment's stop took {took:.0f} s of a {STOP_GRACE} s grace"


@pytest.fixture(scope="package")
def deployment(supervisor: Supervisor) -> Deployment:
    return supervisor.deployment


@pytest.fixture(scope="package")
def api(deployment: Deployment) -> Api:
    return Api(deployment.url, USERNAME, deployment.password)


@pytest.fixture(scope="package")
def user_api(deployment: Deployment) -> Api:
    """The REST API as ``TRIGGER_USER`` (USER role), the account the security tests attack with."""
    return Api(deployment.url, TRIGGER_USER, deployment.passwords[TRIGGER_USER])


@pytest.fixture(scope="package")
def registry(deployment: Deployment):
    """The deployment's model registry: the embedded default artifact root, ``file://<home>/trainium``."""
    from airflow_provider_trainium.registry import ModelRegistry

    return ModelRegistry((deployment.home / "trainium").as_uri())


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


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


# Module scope: sync Playwright runs an event loop in this thread until it closes, which later tests
# calling asyncio.run() could not share.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium driven by Playwright (its own browser download cannot work here)."""
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} not found: run .ci/system-deps.sh (Debian's chromium package)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


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
