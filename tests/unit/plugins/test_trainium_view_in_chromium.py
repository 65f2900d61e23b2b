"""Every kind of Trainium job in the view, in real Chromium: the loss curves of a ``@task.trainium`` task, of a
``script=`` job that calls ``trainium_trainer.track`` and of an unchanged Hugging Face Trainer script (its printed
log dicts through the built-in ``metric_patterns``), and the help page of a job without curves. The view's first
paint inside its Airflow frame is measured with the browser's Performance API and printed.

The cheapest setup that still drives the real view: the plugin's own ASGI app mounted under its ``url_prefix`` as
the API server mounts it, served by uvicorn in this process, over the real metadata database and auth manager
(rows as in test_runs_jobs.py) and a JWT in the ``_token`` cookie the Airflow UI sets. Every stream is written by the
real writers: ``track.Tracker.from_env`` (what ``track.log`` makes from the launcher's environment) and
``metric_lines.from_env`` fed the Hugging Face Trainer's lines (the launcher's reader; that the unchanged script
really prints them and gets this stream is tests/integration/byo/test_user_commands.py's promise). A stand-in
for Airflow's task-instance tab embeds the view in an iframe at the plugin's own ``external_views`` href.

The full deployment's browser tests (tests/e2e/test_trainium_view.py) keep what only it can show: the live
training run, Airflow's own navigation and tabs. First paint: printed, never asserted (timed tests flake; speed
targets live in benchmarks/). To see the figures:
``.venv/bin/python -m pytest -p no:randomly -q -s tests/unit/plugins/test_trainium_view_in_chromium.py -k first_paint``.
"""

from __future__ import annotations

import html
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from airflow_provider_trainium.plugins.locate import run_output_prefix
from tests.browser import chromium
from tests.conftest import free_port, set_trainium_connection
from tests.unit.plugins.conftest import Rows
from tests.unit.plugins.test_runs_jobs import DECORATED
from tests.unit.trainium_trainer.test_metric_lines import HF_OUTPUT
from trainium_trainer import boundary, metric_lines, track
from trainium_trainer.common.stream import read_records

pytestmark = pytest.mark.process

RUN_ID = "manual__2026-01-01T00:00:00+00:00"
#: The three ways a job gets curves, by task id: how Airflow records its task, and what writes its stream.
JOBS = {
    "decorated": {"row": DECORATED, "writer": "track"},
    "script_job": {"row": {"operator": "TrainiumJobOperator"}, "writer": "track"},
    "hf_trainer": {"row": {"operator": "TrainiumJobOperator"}, "writer": "metric_patterns"},
}
NO_CURVES = "no_curves"
#: Set in every frame before the page's own scripts: when the view's loss chart was drawn (performance.now()).
CHART_CLOCK = """
new MutationObserver((_, observer) => {
  if (document.querySelector('[data-chart=loss][data-rendered=true]')) {
    window.lossDrawnAt = performance.now();
    observer.disconnect();
  }
}).observe(document, {subtree: true, childList: true, attributes: true});
"""


def track_steps(output_uri: str, losses: list[float]) -> None:
    """What a script's ``track.log`` calls write under the launcher (rank 0, ``TRAINIUM_OUTPUT_URI`` set): a
    ``@task.trainium`` function and a ``script=`` job report alike."""
    tracker = track.Tracker.from_env({boundary.ENV_OUTPUT_URI: output_uri})
    for step, loss in enumerate(losses, start=1):
        tracker.log(step=step, loss=loss, total_steps=len(losses), samples=64)
    tracker.log_eval(step=len(losses), loss=losses[-1] * 1.1)
    tracker.close()


def hf_trainer_lines(output_uri: str) -> None:
    """What the launcher makes of an unchanged Hugging Face Trainer script's output with
    ``metric_patterns="huggingface"``: its printed log dicts, line by line, into the stream."""
    env = {boundary.ENV_OUTPUT_URI: output_uri,
           boundary.ENV_METRIC_PATTERNS: json.dumps(dict(boundary.METRIC_PATTERN_SETS["huggingface"]))}  # fmt: skip
    reader = metric_lines.from_env(env)
    assert reader is not None
    for line in HF_OUTPUT:
        reader.feed(line)
    reader.close()


def host_app() -> Any:
    """The view mounted as the API server mounts a plugin's ``fastapi_apps``, and a stand-in for the Airflow
    UI's task-instance tab: the plugin's ``external_views`` href in an iframe, its placeholders filled in as the
    UI fills them (``encodeURIComponent``)."""
    from fastapi import FastAPI
    from fastapi.responses import HTMLResponse

    from airflow_provider_trainium.plugins.trainium_view import TrainiumViewPlugin

    app = FastAPI()
    tab = next(v for v in TrainiumViewPlugin.external_views if v["destination"] == "task_instance")

    @app.get("/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/plugin/" + tab["url_route"], response_class=HTMLResponse)
    def task_tab(dag_id: str, run_id: str, task_id: str) -> str:
        href = tab["href"]
        for name, value in (("DAG_ID", dag_id), ("RUN_ID", run_id), ("TASK_ID", task_id), ("MAP_INDEX", "-1")):
            href = href.replace("{" + name + "}", quote(value, safe=""))
        return (f'<!doctype html><title>Airflow</title><nav>Airflow</nav>'
                f'<iframe src="{html.escape(href)}" style="width:100%;height:1000px"></iframe>')  # fmt: skip

    for spec in TrainiumViewPlugin.fastapi_apps:
        app.mount(spec["url_prefix"], spec["app"])
    return app


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> Iterator[tuple[str, dict[str, str]]]:
    """One DAG run with a job of each kind and one without curves: its DAG id and each task's output URI."""
    root = (tmp_path_factory.mktemp("artifacts") / "root").as_uri()
    rows = Rows()
    with pytest.MonkeyPatch.context() as patch:
        set_trainium_connection(patch, artifact_root=root)
        try:
            dag_id = rows.dag("every_job_kind", "red")
            outputs = {}
            for task_id, job in {**JOBS, NO_CURVES: {"row": DECORATED, "writer": None}}.items():
                rows.task(dag_id, RUN_ID, task_id=task_id, **job["row"])
                outputs[task_id] = run_output_prefix(root, dag_id, RUN_ID, task_id)
                if job["writer"] == "track":
                    track_steps(outputs[task_id], [2.0, 1.4, 1.1, 0.9] if task_id == "decorated" else [3.0, 2.5])
                elif job["writer"] == "metric_patterns":
                    hf_trainer_lines(outputs[task_id])
            profiled = Path(outputs["script_job"].removeprefix("file://")) / boundary.PROFILE_DIR
            profiled.mkdir(parents=True)  # a profile_steps trace (the trainer writes it: test_mnist_training.py)
            (profiled / boundary.profile_trace_name(0)).write_text('{"traceEvents": []}')
            yield dag_id, outputs
        finally:
            rows.remove()


@pytest.fixture(scope="module")
def server(jobs) -> Iterator[str]:
    """uvicorn serving ``host_app`` on a free loopback port, in a thread of this process."""
    import uvicorn

    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(host_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


# Module scope: sync Playwright runs an event loop in this thread until it closes (as in tests/e2e/conftest.py).
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(browser, server) -> Iterator[Any]:
    """A fresh browser context logged in as the Airflow UI logs in: the auth manager's JWT in ``_token``."""
    from airflow.api_fastapi.app import create_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    token = create_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    context.set_default_timeout(20_000)
    context.add_cookies([{"name": "_token", "value": token, "url": server}])
    context.add_init_script(CHART_CLOCK)
    yield context.new_page()
    context.close()


def loaded(frame: Any) -> None:
    """Wait until the view has rendered what its JSON said (or shown its error)."""
    frame.locator("body[data-loaded]").wait_for()
    assert frame.locator("body").get_attribute("data-loaded") == "true", frame.locator("#status").inner_text()


def open_task_tab(page: Any, server: str, dag_id: str, task_id: str) -> Any:
    """The view in the task instance's Trainium tab; its frame, once loaded."""
    page.goto(f"{server}/dags/{dag_id}/runs/{quote(RUN_ID, safe='')}/tasks/{task_id}/plugin/trainium-task")
    frame = page.locator("iframe").element_handle().content_frame()
    loaded(frame)
    return frame


def test_every_job_kind_is_listed_in_the_view(page, server, jobs):
    dag_id, _ = jobs
    page.goto(f"{server}/trainium/")
    loaded(page)
    rows = page.locator(f'tr[data-testid=run-row][data-dag-id="{dag_id}"]')
    shown = {rows.nth(i).get_attribute("data-task-id"): rows.nth(i).locator("[data-col=operator]").inner_text()
             for i in range(rows.count())}  # fmt: skip
    assert shown == {"decorated": "@task.trainium", "script_job": "TrainiumJobOperator",
                     "hf_trainer": "TrainiumJobOperator", NO_CURVES: "@task.trainium"}  # fmt: skip


@pytest.mark.parametrize("task_id", list(JOBS))
def test_each_job_kinds_loss_curve_is_drawn_in_its_task_tab(page, server, jobs, task_id):
    dag_id, outputs = jobs
    frame = open_task_tab(page, server, dag_id, task_id)
    assert frame.locator("h2").inner_text().endswith(task_id)
    assert frame.locator("[data-testid=help]").count() == 0
    frame.locator("[data-chart=loss][data-rendered=true]").wait_for()
    assert frame.locator("[data-chart=loss] canvas").count() == 1
    plotted = json.loads(frame.locator("[data-chart=loss]").get_attribute("data-series"))
    train = read_records(outputs[task_id], boundary.TRAIN_SOURCE, kinds=[boundary.KIND_TRAIN])
    assert len(train) >= 2
    assert plotted == {"this run": {"x": [r["step"] for r in train], "y": [r["loss"] for r in train]}}
    evals = json.loads(frame.locator("[data-chart=eval]").get_attribute("data-series"))
    assert evals["eval loss"]["y"], "the eval record was not plotted"
    if task_id == "hf_trainer":  # the Trainer's own log dicts, two train lines of local rank 0
        assert plotted["this run"]["y"] == [4.1636, 4.0101]
    links = frame.locator("[data-testid=profiles] a")
    if task_id != "script_job":
        assert links.count() == 0
        return
    assert links.inner_text() == "trace-rank0.json"
    with page.expect_download() as download:
        links.click()
    assert json.loads(Path(download.value.path()).read_text()) == {"traceEvents": []}


def test_a_job_without_curves_shows_how_to_get_them(page, server, jobs):
    dag_id, _ = jobs
    frame = open_task_tab(page, server, dag_id, NO_CURVES)
    assert frame.locator("h2").inner_text().endswith(NO_CURVES)
    assert frame.locator("[data-chart]").count() == 0
    help_text = frame.locator("[data-testid=help]").inner_text()
    assert "trainium_trainer.track" in help_text and "track.log(" in help_text


def test_first_paint_of_the_embedded_view(page, server, jobs):
    """The view's first contentful paint in its frame, and its loss chart drawn, from the start of the tab's
    navigation (the frame's Performance API entries put on the top page's clock): printed, not asserted."""
    dag_id, _ = jobs
    frame = open_task_tab(page, server, dag_id, "decorated")
    frame.locator("[data-chart=loss][data-rendered=true]").wait_for()
    frame.wait_for_function("window.lossDrawnAt !== undefined")
    top_origin = page.evaluate("performance.timeOrigin")
    timings = frame.evaluate(
        """() => ({
            origin: performance.timeOrigin,
            paint: performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint'),
            drawn: window.lossDrawnAt,
        })"""
    )
    assert timings["paint"] is not None, "Chromium reported no first-contentful-paint for the view's frame"
    offset = timings["origin"] - top_origin
    fcp_ms, drawn_ms = offset + timings["paint"]["startTime"], offset + timings["drawn"]
    print(f"\nembedded view (in-process server, headless Chromium): first contentful paint {fcp_ms:.0f} ms, "
          f"loss chart drawn {drawn_ms:.0f} ms after the tab's navigation started")  # fmt: skip
