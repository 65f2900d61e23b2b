"""Promotion reads evidence: the verdict record, sealed by the evaluation job alone, binds pass/fail (from its
numbers) to the very files judged; XComs never name a place on their own; a backfill promotes only where the DAG's
author says so."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest
from airflow.sdk import ObjectStoragePath

from airflow_provider_trainium.operators.registry import may_promote
from airflow_provider_trainium.operators.run_outputs import XComMismatchError, checked_against_xcom, instance_prefix
from airflow_provider_trainium.registry import hashing
from airflow_provider_trainium.registry.seal import job_key, sealed
from airflow_provider_trainium.registry.verdict import VerdictError, check_verdict, files_fingerprint, read_verdict
from trainium_trainer import boundary
from trainium_trainer.common.verdict import model_entries, write_verdict

LOG = logging.getLogger(__name__)


@pytest.fixture
def model(tmp_path):
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"\x01" * 100)
    (model / "sub" / "config.json").write_text('{"a": 1}')
    (model / "stream" / "train").mkdir(parents=True)  # run bookkeeping: not the model
    (model / "stream" / "train" / "000000.jsonl").write_text("{}\n")
    return model


def test_the_trainer_and_the_registry_fingerprint_the_same_files_alike(model):
    assert boundary.RUN_BOOKKEEPING_PREFIXES == hashing.RUN_BOOKKEEPING
    entries = model_entries(model.as_uri())
    assert [e[0] for e in entries] == ["model.safetensors", "sub/config.json"]
    assert boundary.model_fingerprint(entries) == files_fingerprint(ObjectStoragePath(model.as_uri()))
    (model / "sub" / "config.json").write_text('{"a": 2}')  # same size, other bytes
    assert boundary.model_fingerprint(entries) != files_fingerprint(ObjectStoragePath(model.as_uri()))


JOB = "trainium_mnist_mlp-evaluate-0123456789ab"


def verdict_for(model, out, monkeypatch, passed: bool = True, job: str = JOB) -> dict:
    """The verdict the evaluation job named ``job`` writes, with its own key in its environment."""
    monkeypatch.setenv(boundary.ENV_EVIDENCE_KEY, job_key(job))
    return write_verdict(out.as_uri(), model_uri=model.as_uri(), metric="accuracy", value=0.97 if passed else 0.4958,
                         threshold=0.9, comparison=">=")  # fmt: skip


def test_a_passing_verdict_for_these_files_is_the_only_evidence_that_passes(model, tmp_path, monkeypatch):
    out = tmp_path / "evaluate"
    written = verdict_for(model, out, monkeypatch)
    assert json.loads((out / boundary.VERDICT_FILE).read_text()) == written
    fp = files_fingerprint(ObjectStoragePath(model.as_uri()))
    assert check_verdict(read_verdict(out.as_uri()), fp, out.as_uri(), JOB)["passed"] is True

    with pytest.raises(VerdictError, match="no verdict"):
        check_verdict(read_verdict((tmp_path / "nowhere").as_uri()), fp, "x", JOB)
    with pytest.raises(VerdictError, match="not these"):
        check_verdict(written, "0" * 64, out.as_uri(), JOB)
    with pytest.raises(VerdictError, match="not a trainium-verdict"):
        check_verdict({**written, "format": "x"}, fp, out.as_uri(), JOB)
    failed = verdict_for(model, tmp_path / "evaluate2", monkeypatch, passed=False)
    with pytest.raises(VerdictError, match="failed the model: accuracy 0.4958"):
        check_verdict(failed, fp, "x", JOB)
    assert check_verdict(failed, fp, "x", JOB, must_pass=False)["passed"] is False  # judged, kept, never promoted
    with pytest.raises(VerdictError, match="not these"):
        check_verdict(failed, "0" * 64, "x", JOB, must_pass=False)


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda v, m: {**v, "passed": True}, id="a job flips passed"),
        pytest.param(lambda v, m: {**v, "value": 0.97, "passed": True}, id="a job edits the value"),
        pytest.param(lambda v, m: {k: x for k, x in v.items() if k != boundary.SEAL_FIELD}, id="unsealed"),
        pytest.param(
            lambda v, m: verdict_for(*m, job="trainium_mnist_mlp-evaluate-ffffffffffff"),
            id="another run's evaluation job",
        ),  # fmt: skip
    ],
)
def test_a_verdict_no_longer_as_its_evaluation_job_sealed_it_promotes_nothing(model, tmp_path, monkeypatch, forge):
    failed = verdict_for(model, tmp_path / "evaluate", monkeypatch, passed=False)
    forged = forge(failed, (model, tmp_path / "other", monkeypatch, True))
    with pytest.raises(VerdictError, match="not sealed by evaluation job"):
        check_verdict(forged, files_fingerprint(ObjectStoragePath(model.as_uri())), "x", JOB)


def test_pass_or_fail_comes_from_the_sealed_numbers_not_the_passed_flag(model, tmp_path, monkeypatch):
    failed = verdict_for(model, tmp_path / "evaluate", monkeypatch, passed=False)
    resealed = sealed({**failed, "passed": True}, job_key(JOB))  # as if the evaluation itself said so
    with pytest.raises(VerdictError, match="failed the model"):
        check_verdict(resealed, files_fingerprint(ObjectStoragePath(model.as_uri())), "x", JOB)


def context(run_type: str) -> dict:
    return {"dag_run": SimpleNamespace(run_type=run_type)}


@pytest.mark.parametrize(
    ("run_type", "manual", "backfill", "promotes"),
    [
        ("scheduled", False, False, True),
        ("DagRunType.SCHEDULED", False, False, True),
        ("manual", False, False, False),
        ("manual", True, False, True),
        ("backfill", False, False, False),
        ("backfill", True, False, False),  # manual runs allowed does not let backfills promote
        ("backfill", False, True, True),
        # started by another DAG's operator or by an asset: refused whatever the DAG allows for manual runs
        ("operator_triggered", True, True, False),
        ("asset_triggered", True, True, False),
        ("DagRunType.ASSET_MATERIALIZATION", True, True, False),
        ("", True, True, False),
    ],
)
def test_a_backfill_promotes_only_where_the_dag_says_so(run_type, manual, backfill, promotes):
    assert may_promote(context(run_type), manual, LOG, promote_backfill_runs=backfill) is promotes


def test_a_backfill_run_type_of_airflow_counts_as_one():
    from airflow.utils.types import DagRunType

    assert may_promote(context(str(DagRunType.BACKFILL_JOB)), True, LOG) is False
    assert may_promote(context(DagRunType.BACKFILL_JOB), True, LOG, promote_backfill_runs=True) is True


def test_an_xcom_that_names_another_place_is_refused_naming_both():
    derived = instance_prefix("file:///r/", "runs", "dag", "manual__2026-01-01T00:00:00+00:00", "train")
    assert derived.startswith("file:///r/runs/dag/") and derived.endswith("/train")
    assert checked_against_xcom(derived, derived + "/", "train") == derived
    assert checked_against_xcom(derived, None, "train") == derived
    with pytest.raises(XComMismatchError) as err:
        checked_against_xcom(derived, "file:///tmp/planted", "train")
    assert "file:///tmp/planted" in str(err.value) and derived in str(err.value)
