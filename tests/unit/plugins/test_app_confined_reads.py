"""The view opens only artifact URIs: ``file://`` or ``s3://`` inside the artifact root (``artifacts.confined``).

The proof of concept this answers: an XCom naming a local HTTP server's URL made the API server fetch it and show
what came back. Here a real HTTP server counts the requests that reach it: none may.
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_trainium import artifacts
from airflow_provider_trainium.plugins import stream as view_stream
from airflow_provider_trainium.plugins.app import run_stream
from airflow_provider_trainium.plugins.locate import output_location, run_output_prefix
from tests.unit.plugins.conftest import login


class Counter(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        Counter.requests.append(self.path)
        body = b'{"v": 1, "kind": "train", "time": 1.0, "step": 1, "loss": 0.5}\n'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    """``host:port`` of an HTTP server on loopback that answers every GET and HEAD, and counts them."""
    Counter.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counter)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root" / "runs").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    return tmp_path / "root"


def refused(root: Path, host: str) -> list[str]:
    base = root.as_uri()
    return [
        f"http://{host}/stream",
        f"HTTP://{host}/stream",
        f"https://{host}/stream",
        f"simplecache::http://{host}/stream",
        f"{base}/runs::http://{host}/stream",
        f"file://{host}{root}/runs",
        f"ftp://{host}/x",
        f"memory://{root}/runs",
        f"{base}/../outside",
        f"{base}/runs/../../outside",
        f"{base}/runs/%2e%2e/%2E%2E/outside",
        f"{base}-sibling/runs",
        f"{base}/./runs",
        f"{base}//runs",
        f"{base}/runs?x=1",
        f"{base}/runs#x",
        f"{base}/runs\\..\\..\\outside",
        "file:///etc",
        str(root / "runs"),  # a plain path: artifact URIs name their scheme
        "s3://bucket/runs",
    ]


def test_only_file_uris_inside_the_root_pass(root, http_server):
    base = root.as_uri()
    for uri in (base, f"{base}/", f"{base}/runs/dag/run/train", f"{base}/runs/a%20b"):
        assert artifacts.confined(uri, base) == uri.rstrip("/")
    for uri in refused(root, http_server):
        with pytest.raises(artifacts.ArtifactURIError, match="refused"):
            artifacts.confined(uri, base)


def test_a_symlink_out_of_the_root_is_refused(root):
    (root / "runs" / "link").symlink_to(root.parent / "outside")
    with pytest.raises(artifacts.ArtifactURIError, match="outside the artifact root"):
        artifacts.confined(f"{root.as_uri()}/runs/link", root.as_uri())


@pytest.mark.parametrize(
    ("uri", "inside"),
    [
        ("s3://bucket/root/runs/dag", True),
        ("s3://bucket/root", True),
        ("s3://bucket/root-other/runs", False),
        ("s3://other/root/runs", False),
        ("s3://bucket/root/../models", False),
        ("s3://bucket/root/runs//x", False),
        ("s3://bucket/elsewhere", False),
        ("file:///bucket/root/runs", False),
    ],
)
def test_s3_uris_must_be_in_the_roots_bucket_and_prefix(uri, inside):
    if inside:
        assert artifacts.confined(uri, "s3://bucket/root/") == uri
    else:
        with pytest.raises(artifacts.ArtifactURIError):
            artifacts.confined(uri, "s3://bucket/root/")


def test_the_views_reader_makes_no_request_for_a_refused_uri(root, http_server):
    urllib.request.urlopen(f"http://{http_server}/probe", timeout=10).read()  # the counter counts
    assert Counter.requests == ["/probe"]
    Counter.requests.clear()
    for uri in refused(root, http_server):
        with pytest.raises(artifacts.ArtifactURIError):
            view_stream.read_stream(uri, root.as_uri())
        run = {"dag_id": "d", "run_id": "r", "task_id": "train", "map_index": -1, "rendered_output_uri": uri,
               "output_uri": uri}  # fmt: skip
        shown = run_stream(run, root.as_uri(), None)
        assert shown["location"] is None and shown["series"] is None, uri
        assert any("not read: refused" in n for n in shown["notes"]), shown
    assert Counter.requests == []


def test_the_run_page_over_an_xcom_naming_a_url_makes_no_request(client, auth_manager, rows, http_server):
    """Through the API the way the proof of concept went: the task's XCom and rendered output name the server."""
    dag_id = rows.dag("ssrf_dag", "red")
    url = f"http://{http_server}/stream"
    rows.task(dag_id, "r1", xcoms={"return_value": url, "metrics": {}}, rendered={"output_uri": url})
    resp = client.get(f"/api/runs/{dag_id}/r1", headers=login(auth_manager, "admin", "admin"))
    assert resp.status_code == 200, resp.text
    detail = resp.json()
    assert detail["series"] is None and detail["stream"]["location"] is None
    assert any("not read: refused" in n for n in detail["stream"]["notes"])
    assert Counter.requests == []


def test_an_xcom_cannot_redirect_the_view_to_another_place_in_the_root(root, tmp_path):
    """The location is where the task writes; an XCom that names another run (even inside the root) is noted."""
    base = root.as_uri()
    own = run_output_prefix(base, "d", "r", "train")
    other = run_output_prefix(base, "other_dag", "r", "train")
    for where, step in ((own, 1), (other, 99)):
        folder = Path(where.removeprefix("file://")) / "stream" / "train"
        folder.mkdir(parents=True)
        (folder / "000000.jsonl").write_text(json.dumps({"v": 1, "kind": "train", "time": 1.0, "step": step}) + "\n")
    run = {"dag_id": "d", "run_id": "r", "task_id": "train", "map_index": -1, "output_uri": other}
    shown = run_stream(run, base, None)
    assert shown["location"] == own and shown["series"]["loss"]["x"] == [1]
    assert shown["notes"] == [f"the task's XCom names {other}; the view reads {own}, where the task writes"]
    # A rendered output_uri (the DAG's own setting) is followed, but never into another DAG's runs.
    assert output_location({**run, "rendered_output_uri": f"{base}/custom/place"}, base).uri == f"{base}/custom/place"
    location = output_location({**run, "rendered_output_uri": other}, base)
    assert location.uri is None and "another DAG's run folder" in location.notes[-1]


def test_the_derived_location_is_where_the_operator_writes(tmp_path):
    from types import SimpleNamespace

    from airflow_provider_trainium.hooks.trainium import TrainiumConfig
    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    config = TrainiumConfig(artifact_root="s3://bucket/root/")
    for map_index in (-1, 0, 3):
        ti = SimpleNamespace(dag_id="dag", run_id="manual__2026-01-01T00:00:00+00:00", task_id="train",
                             map_index=map_index)  # fmt: skip
        expected = TrainiumJobOperator.task_instance_prefix({"ti": ti}, config, "runs")
        assert run_output_prefix(config.artifact_root, ti.dag_id, ti.run_id, ti.task_id, map_index) == expected


def test_without_a_readable_trainium_connection_nothing_is_read():
    location = output_location({"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": -1}, None)
    assert location.uri is None and "cannot be read" in location.notes[0]
