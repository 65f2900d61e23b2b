"""Bounded inputs: ``input_uri`` and ``base_model`` read only under the artifact root, the connection's
``allowed_input_prefixes``, or the model registry; the DAG's first task refuses anything else before any
job starts, and the trainer refuses it again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_trainium.neuron.inputs import ALLOWED_PREFIXES_ENV, InputNotAllowedError, check_input
from tests.dag_runs import states
from trainium_trainer.common import inputs as trainer_inputs

DAGS = Path(__file__).resolve().parents[3] / "dags"
ROOT = "file:///srv/airflow/trainium"
PREFIXES = [ROOT, "s3://corpora/instructions"]
REFUSED = [
    "file:///etc/passwd",
    "/etc/shadow",
    "/srv/airflow/trainium/../../../etc/passwd",
    "file:///srv/airflow/trainium-other/x.jsonl",
    "https://example.com/data.jsonl",
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "s3://corpora/instructions-evil/day.jsonl",
    "s3://other-bucket/day.jsonl",
    "relative/path.jsonl",
]
ALLOWED = [
    "file:///srv/airflow/trainium/inputs/day.jsonl",
    "/srv/airflow/trainium/inputs/{ds}.jsonl",
    "s3://corpora/instructions/2026-01-01.jsonl",
    "s3://corpora/instructions",
]


@pytest.mark.parametrize("uri", REFUSED)
def test_the_provider_and_the_trainer_refuse_inputs_outside_the_prefixes(uri):
    with pytest.raises(InputNotAllowedError, match="input_uri"):
        check_input("input_uri", uri, PREFIXES)
    env = {ALLOWED_PREFIXES_ENV: json.dumps(PREFIXES)}
    with pytest.raises(trainer_inputs.InputNotAllowedError):
        trainer_inputs.check_input("--input-uri", uri, env)


@pytest.mark.parametrize("uri", ALLOWED)
def test_inputs_under_the_prefixes_are_allowed(uri):
    assert check_input("input_uri", uri, PREFIXES) == uri
    assert trainer_inputs.check_input("--input-uri", uri, {ALLOWED_PREFIXES_ENV: json.dumps(PREFIXES)}) == uri


def test_the_trainer_exits_as_bad_input(monkeypatch, tmp_path):
    from trainium_trainer.common.errors import EXIT_BAD_INPUT
    from trainium_trainer.llama import data

    monkeypatch.setenv(ALLOWED_PREFIXES_ENV, json.dumps([tmp_path.as_uri()]))
    with pytest.raises(SystemExit) as exited:
        data.main(["--output-uri", (tmp_path / "out").as_uri(), "--input-uri", "file:///etc/passwd"])
    assert exited.value.code == EXIT_BAD_INPUT
    assert not (tmp_path / "out").exists()


@pytest.fixture
def artifact_root(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    extra = {"artifact_root": root.as_uri(), "allowed_input_prefixes": ["s3://corpora/instructions"]}
    monkeypatch.setenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", json.dumps({"conn_type": "trainium", "extra": extra}))
    return root


@pytest.mark.parametrize(
    ("dag_id", "conf"),
    [
        ("trainium_llama_finetune", {"input_uri": "file:///etc/passwd"}),
        ("trainium_llama_finetune", {"base_model": "/etc"}),
        ("trainium_llama_pretrain", {"input_uri": "https://example.com/corpus.txt"}),
        ("trainium_titan_pretrain", {"input_uri": "https://example.com/corpus.txt"}),
    ],
)
def test_a_run_conf_input_outside_the_root_is_refused_before_any_job(artifact_root, dag_id, conf):
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(DAGS)).get_dag(dag_id)
    run = dag.test(run_conf={"compute": "local", **conf})
    result = states(run)
    assert str(run.state) == "failed" and result["check_params"] == "failed"
    assert result["prepare_data"] == "upstream_failed"
    assert not (artifact_root / "llama").exists()  # no job wrote anything
