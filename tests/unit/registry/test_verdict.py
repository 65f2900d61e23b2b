"""Promotion reads evidence: the verdict record binds pass/fail to the very files judged; XComs never name a place
on their own; a backfill promotes only where the DAG's author says so."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest
from airflow.sdk import ObjectStoragePath

from airflow_provider_trainium.operators.registry import may_promote
from airflow_provider_trainium.operators.run_outputs import XComMismatchError, checked_against_xcom, instance_prefix
from airflow_provider_trainium.registry import hashing
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


def verdict_for(model, out, passed: bool = True) -> dict:
    return write_verdict(out.as_uri(), model_uri=model.as_uri(), metric="accuracy", value=0.97 if passed else 0.5,
                         threshold=0.9, comparison=">=", passed=passed)  # fmt: skip


def test_a_passing_verdict_for_these_files_is_the_only_evidence_that_passes(model, tmp_path):
    out = tmp_path / "evaluate"
    written = verdict_for(model, out)
    assert json.loads((out / boundary.VERDICT_FILE).read_text()) == written
    fp = files_fingerprint(ObjectStoragePath(model.as_uri()))
    assert check_verdict(read_verdict(out.as_uri()), fp, out.as_uri())["passed"] is True

    with pytest.raises(VerdictError, match="no verdict"):
        check_verdict(read_verdict((tmp_path / "nowhere").as_uri()), fp, "x")
    with pytest.raises(VerdictError, match="not these"):
        check_verdict(written, "0" * 64, out.as_uri())
    with pytest.raises(VerdictError, match="not a trainium-verdict"):
        check_verdict({**written, "format": "x"}, fp, out.as_uri())
    failed = verdict_for(model, tmp_path / "evaluate2", passed=False)
    with pytest.raises(VerdictError, match="failed the model: accuracy 0.5"):
        check_verdict(failed, fp, "x")
    with pytest.raises(VerdictError, match="failed the model"):
        check_verdict({**written, "passed": "true"}, fp, "x")  # only a JSON true passes
    assert check_verdict(failed, fp, "x", must_pass=False) == failed  # judged, kept, never promoted
    with pytest.raises(VerdictError, match="not these"):
        check_verdict(failed, "0" * 64, "x", must_pass=False)


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
