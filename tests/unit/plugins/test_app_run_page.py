"""One run's page over a real stream: a malformed record is a note on that page and on every later version's,
not an error (it used to answer 500 on both)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_trainium.plugins.locate import run_output_prefix
from tests.conftest import set_trainium_connection
from tests.unit.plugins.conftest import Rows, login


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The artifact root of ``trainium_default``, in the test's own folder: the page reads streams under it."""
    uri = (tmp_path / "root").as_uri()
    set_trainium_connection(monkeypatch, artifact_root=uri)
    return uri


def write_stream(root: str, dag_id: str, run_id: str, lines: list[str]) -> None:
    folder = Path(run_output_prefix(root, dag_id, run_id, "train").removeprefix("file://")) / "stream" / "train"
    folder.mkdir(parents=True)
    (folder / "000000.jsonl").write_text("".join(line + "\n" for line in lines))


def train(step: int, **fields) -> str:
    return json.dumps({"v": 1, "kind": "train", "time": 1000.0 + step, "step": step, "loss": 1.0 / step, **fields})


def registered(rows: Rows, dag_id: str, run_id: str, version: int) -> None:
    rows.task(dag_id, run_id, xcoms={"metrics": {"accuracy": 0.9}})
    rows.task(dag_id, run_id, task_id="register", operator="TrainiumRegisterModelOperator",
              xcoms={"return_value": {"name": "m", "version": version, "uri": "file:///m"}})  # fmt: skip


def test_a_malformed_record_is_a_note_on_its_page_and_on_later_versions(client, auth_manager, rows, root):
    dag_id = rows.dag("bad_stream", "red")
    registered(rows, dag_id, "r1", 1)
    registered(rows, dag_id, "r2", 2)
    write_stream(root, dag_id, "r1", [train(1), '{"v": 1, "kind": "train", "time": 1.0, "step": "two"}',
                                      '{"v": 1, "kind": "train", "time": 1.0, "step": NaN, "loss": 0.5}',
                                      train(3, loss=float("nan")), train(4)])  # fmt: skip
    write_stream(root, dag_id, "r2", [train(1), train(2)])
    admin = login(auth_manager, "admin", "admin")

    first = client.get(f"/api/runs/{dag_id}/r1", headers=admin)
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["series"]["loss"] == {"x": [1, 3, 4], "y": [1.0, None, 0.25]}  # a NaN loss is a gap, kept
    assert [n.split(":")[0] for n in body["stream"]["notes"]] == ["train/000000.jsonl record 2",
                                                                  "train/000000.jsonl record 3"]  # fmt: skip
    later = client.get(f"/api/runs/{dag_id}/r2", headers=admin)
    assert later.status_code == 200, later.text
    (previous,) = later.json()["previous"]
    assert previous["run"]["run_id"] == "r1" and previous["series"]["loss"]["x"] == [1, 3, 4]
    assert later.json()["series"]["loss"]["x"] == [1, 2] and later.json()["stream"]["notes"] == []


def test_a_runs_profile_traces_are_linked_and_served_to_its_readers_only(client, auth_manager, rows, root):
    dag_id = rows.dag("profiled", "red")
    registered(rows, dag_id, "r1", 1)
    write_stream(root, dag_id, "r1", [train(1)])
    # what trainium_trainer.common.profile writes (its own test: tests/integration/trainer/test_mnist_training.py)
    profile = Path(run_output_prefix(root, dag_id, "r1", "train").removeprefix("file://")) / "profile"
    profile.mkdir()
    (profile / "trace-rank0.json").write_text(json.dumps({"traceEvents": [{"name": "aten::ones", "ph": "X"}]}))
    (profile / "notes.txt").write_text("not a trace")
    admin = login(auth_manager, "admin", "admin")

    page = client.get(f"/api/runs/{dag_id}/r1", headers=admin).json()
    assert page["stream"]["profiles"] == ["trace-rank0.json"]
    trace = client.get(f"/api/runs/{dag_id}/r1/profile/trace-rank0.json?task_id=train", headers=admin)
    assert trace.status_code == 200 and "attachment" in trace.headers["content-disposition"]
    assert any(event.get("name") == "aten::ones" for event in trace.json()["traceEvents"])
    for name in ("notes.txt", "..%2F..%2Fstream%2Ftrain%2F000000.jsonl"):
        assert client.get(f"/api/runs/{dag_id}/r1/profile/{name}?task_id=train", headers=admin).status_code == 404
    blue_user = login(auth_manager, "bob", "viewer", [rows.team("blue")])
    assert client.get(f"/api/runs/{dag_id}/r1/profile/trace-rank0.json", headers=blue_user).status_code == 404
