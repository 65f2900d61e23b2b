"""The Trainium view in a real browser (Debian's chromium driven by Playwright) against the real api-server of the
deployment, over the lane's shared MNIST run (tests/e2e/conftest.py): watched while it trains, then finished.

Screenshots go to test-artifacts/screenshots/ (printed by the tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

import pytest

from airflow_provider_trainium.plugins.app import MAX_COMPARED
from airflow_provider_trainium.plugins.locate import run_output_prefix
from tests.e2e.conftest import MNIST, TERMINAL, wait_for

pytestmark = pytest.mark.slow

VIEW = "/trainium"
ENDPOINTS = ["/", "/api/runs", f"/api/runs/{MNIST}/any-run", "/static/uPlot.iife.min.js", "/static/trainium-view.js"]
#: FastAPI's own pages: off (they needed no login and pulled Swagger from a CDN).
NO_PAGES = ["/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"]


def loaded(frame) -> None:
    """Wait until the view has rendered what its JSON said (or shown its error)."""
    frame.locator("body[data-loaded]").wait_for()
    assert frame.locator("body").get_attribute("data-loaded") == "true", frame.locator("#status").inner_text()


def print_first_paint(page: Any) -> None:
    """The embedded view's first contentful paint on the dev deployment, from the start of the tab's navigation
    (the frame's Performance API entry put on the top page's clock): printed for the record, never asserted."""
    view = next(f for f in page.frames if urlparse(f.url).path.startswith(VIEW))
    paint = view.evaluate(
        """() => ({origin: performance.timeOrigin,
                   fcp: performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint')})"""
    )
    if paint["fcp"] is not None:
        at = paint["origin"] - page.evaluate("performance.timeOrigin") + paint["fcp"]["startTime"]
        print(f"\nembedded view on the dev deployment: first contentful paint {at:.0f} ms after the tab opened")


def stream_records(output_uri: str) -> dict[str, list[dict[str, Any]]] | None:
    """The run's metrics stream read straight from its files (contract: stream/<source>/<seq>.jsonl)."""
    root = Path(unquote(urlparse(output_uri).path)) / "stream"
    if not root.is_dir():
        return None
    out = {}
    for source in sorted(p for p in root.iterdir() if p.is_dir()):
        lines = [line for chunk in sorted(source.glob("*.jsonl")) for line in chunk.read_text().splitlines()]
        out[source.name] = [r for r in map(json.loads, filter(None, lines)) if r.get("v") == 1]
    return out


def test_anonymous_requests_to_every_endpoint_are_refused(deployment):
    import requests

    for path in ENDPOINTS:
        url = f"{deployment.url}{VIEW}{path}"
        assert requests.get(url, timeout=30).status_code in (401, 403), path
        forged = {"Authorization": "Bearer not-a-token"}
        assert requests.get(url, headers=forged, timeout=30).status_code in (401, 403), path
        assert requests.get(url, cookies={"_token": "not-a-token"}, timeout=30).status_code in (401, 403), path
    for path in NO_PAGES:
        resp = requests.get(f"{deployment.url}{VIEW}{path}", timeout=30)
        assert resp.status_code in (401, 403, 404) and "cdn" not in resp.text, path


def loss_points(frame) -> int:
    series = json.loads(frame.locator("[data-chart=loss]").get_attribute("data-series"))
    return len(series.get("this run", {}).get("x", []))


def test_a_running_training_is_plotted_and_updates_without_a_reload(page, deployment, api, mnist_run_id):
    """Opened while ``train`` runs (found from the run's identity: no XCom names the output yet), the run page
    redraws from the growing stream by itself until the task ends."""
    run_id = mnist_run_id
    root = (deployment.home / "trainium").as_uri()
    chunks = Path(unquote(urlparse(run_output_prefix(root, MNIST, run_id, "train")).path)) / "stream" / "train"

    def streaming() -> bool:
        state = api.task_instance(MNIST, run_id, "train")["state"]
        assert state not in TERMINAL, f"train ended ({state}) before its stream was seen"
        return state in ("running", "deferred") and any(chunks.glob("*.jsonl"))

    wait_for(streaming, 900, "the train task to write its first stream chunk", deployment)
    page.goto(f"{deployment.url}{VIEW}/?dag_id={MNIST}&run_id={quote(run_id, safe='')}&task_id=train")
    loaded(page)
    page.evaluate("window.sameDocument = true")  # gone if anything reloads the page
    page.locator("[data-chart=loss][data-rendered=true]").wait_for()
    first = loss_points(page)
    progress = page.locator("[data-testid=progress]").inner_text()
    assert page.locator("body").get_attribute("data-state") in ("running", "deferred"), progress
    step, total = map(int, progress.split()[1].split("/"))
    assert first > 0 and step < total, f"the training ended before the page could see it grow: {progress}"
    plotted = "(JSON.parse(document.querySelector('[data-chart=loss]').dataset.series)['this run'] || {x: []})"
    page.wait_for_function(
        f"n => {plotted}.x.length > n",
        arg=first,
        timeout=120_000,
    )
    assert page.evaluate("window.sameDocument") is True  # redrawn in place, not reloaded
    assert int(page.locator("body").get_attribute("data-refreshes")) >= 1


def test_plugin_is_registered_with_navigation_run_and_task_views(api):
    plugin = next(p for p in api.get("plugins")["plugins"] if p["name"] == "trainium")
    assert [a["url_prefix"] for a in plugin["fastapi_apps"]] == [VIEW]
    views = {v["destination"]: v for v in plugin["external_views"]}
    assert set(views) == {"nav", "dag_run", "task_instance"}
    assert "{RUN_ID}" in views["dag_run"]["href"] and "{TASK_ID}" in views["task_instance"]["href"]


def test_run_list_shows_layout_cost_metrics_and_version(page, deployment, api, mnist_run):
    run = mnist_run
    body = api.session.get(f"{deployment.url}{VIEW}/api/runs", timeout=60).json()  # the same login, as JSON
    listed = {(r["run_id"], r["task_id"]): r for r in body["runs"] if r["dag_id"] == MNIST}
    row = listed[(run["run_id"], "train")]
    assert row["state"] == "success" and row["output_uri"] == run["output_uri"]
    assert row["model"]["name"] == "mnist-mlp" and row["model"]["version"] == run["version"]
    assert row["final"]["accuracy"] == api.xcom(MNIST, run["run_id"], "train", "metrics")["accuracy"]
    assert row["layout"]["compute"] == "local" and row["layout"]["instance_type"]

    page.goto(f"{deployment.url}/plugin/trainium")  # through Airflow's navigation: the view in its frame
    frame = page.frame_locator("iframe").first
    loaded(frame)
    shown = frame.locator(f'tr[data-testid=run-row][data-run-id="{run["run_id"]}"][data-task-id=train]')
    assert shown.locator("[data-col=version]").inner_text() == f"mnist-mlp v{run['version']}"
    assert row["cost"] == api.xcom(MNIST, run["run_id"], "train", "trainium_cost")  # what the task pushed
    assert row["cost"]["usd"] == 0.0 and row["cost"]["is_estimate"] is True
    cost = shown.locator("[data-col=cost]").inner_text()
    assert cost.startswith("$0.00 (est. $"), cost


def test_run_page_plots_the_metrics_stream(page, deployment, mnist_run):
    run = mnist_run
    # The DAG run page's tab: the view in an iframe with the run filled in.
    page.goto(f"{deployment.url}/dags/{MNIST}/runs/{quote(run['run_id'], safe='')}/plugin/trainium-run")
    frame = page.frame_locator("iframe").first
    loaded(frame)
    print_first_paint(page)
    assert frame.locator("h2").inner_text().endswith("train")
    # The deployment's registry is fresh: every older version of the model came from a run listed here.
    assert frame.locator("tr[data-testid=run-row]").count() == min(run["version"] - 1, MAX_COMPARED)

    sources = stream_records(run["output_uri"])
    assert sources is not None, "the training run wrote no stream/ folder"
    train = [r for r in sources.get("train", []) if r.get("kind") == "train"]
    assert train, "the stream holds no train record"
    frame.locator("[data-chart=loss][data-rendered=true]").wait_for()
    plotted = json.loads(frame.locator("[data-chart=loss]").get_attribute("data-series"))
    assert plotted["this run"] == {"x": [r["step"] for r in train], "y": [r["loss"] for r in train]}
    # The earlier versions of the model are overlaid for comparison, each under its own name.
    assert set(plotted) - {"this run"} <= {f"mnist-mlp v{v}" for v in range(1, run["version"])}
    throughput = json.loads(frame.locator("[data-chart=throughput]").get_attribute("data-series"))
    samples = [r["samples_per_s"] for r in train]
    if any(v is not None for v in samples):
        assert throughput["samples/s"]["y"] == samples
    device = [r for name, recs in sources.items() if name.startswith("monitor-") for r in recs if r["kind"] == "device"]
    cores = json.loads(frame.locator("[data-chart=neuroncores]").get_attribute("data-series"))
    for record in device:  # every core the monitor reported is a plotted series
        for core in record["neuroncores"]:
            assert f"node{record['node']}/nc{core}" in cores
    host = [r for name, recs in sources.items() if name.startswith("monitor-") for r in recs if r["kind"] == "host"]
    cpu = json.loads(frame.locator("[data-chart=host]").get_attribute("data-series"))
    assert sorted(cpu) == sorted({f"node{r['node']} CPU" for r in host if r.get("cpu_percent") is not None})


def test_plain_page_shows_every_chart_of_the_run(page, deployment, mnist_run):
    """The view outside Airflow's frame (the address ``make demo`` prints); its screenshot is the README's."""
    run = mnist_run
    page.goto(f"{deployment.url}{VIEW}/?dag_id={MNIST}&run_id={quote(run['run_id'], safe='')}")
    loaded(page)
    assert stream_records(run["output_uri"]) is not None, "the training run wrote no stream/ folder"
    charts = page.locator("[data-chart]")
    assert charts.count() == 6
    page.locator("[data-chart=loss][data-rendered=true]").wait_for()
    assert page.locator("[data-chart=loss] canvas").count() == 1


def test_task_instance_page_opens_the_same_run(page, deployment, mnist_run):
    run = mnist_run
    page.goto(f"{deployment.url}/dags/{MNIST}/runs/{quote(run['run_id'], safe='')}/tasks/train/plugin/trainium-task")
    frame = page.frame_locator("iframe").first
    loaded(frame)
    assert run["run_id"] in frame.locator("[data-testid=summary]").inner_text()
    assert frame.locator("#status").inner_text() == f"run {run['run_id']}"
