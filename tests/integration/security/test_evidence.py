"""Task states are not evidence: with ``evaluate`` marked success (it never ran), ``register`` publishes and
promotes only a model whose verdict record passed its very files; a backfill does not move ``latest``; and a verdict
counts only on the hold-out set this run's ``prepare_holdout`` job sealed (a set swapped between the data task and the
evaluation, another run's sealed set, or a verdict naming none registers nothing).

``dag.test(mark_success_pattern=...)`` marks the evaluation task success without running it, as a user with
task-instance edit rights would; the verdicts are written by the trainer's own writer, as the job would.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_provider_trainium.compute.naming import job_name
from airflow_provider_trainium.registry import ModelRegistry
from airflow_provider_trainium.registry.seal import job_key
from tests.conftest import set_trainium_connection
from tests.integration.registry.conftest import run_dag
from trainium_trainer import boundary
from trainium_trainer.common.holdout import write_manifest
from trainium_trainer.common.verdict import write_verdict

RUN_AFTER = datetime(2026, 1, 2, tzinfo=UTC)


def run_id() -> str:
    """The run ``dag.test(run_after=RUN_AFTER, logical_date=RUN_AFTER)`` creates."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunType

    return DagRun.generate_run_id(run_type=DagRunType.MANUAL, logical_date=RUN_AFTER, run_after=RUN_AFTER)


def model_dir(tmp_path: Path) -> Path:
    model = tmp_path / "runs" / "model"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"\x02" * 64)
    (model / "metrics.json").write_text('{"accuracy": 0.5}')
    return model


def run_register(tmp_path: Path, dag_id: str, **run_kwargs):
    from airflow.sdk import DAG

    from airflow_provider_trainium.operators.job import TrainiumJobOperator
    from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator

    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        evaluate = TrainiumJobOperator(task_id="evaluate", entry_point="trainium_trainer.mnist_mlp.evaluate",
                                       distributed=False, compute="local",
                                       output_uri=(tmp_path / "evaluation").as_uri())  # fmt: skip
        register = TrainiumRegisterModelOperator(task_id="register", model_name="m",
                                                 source_uri=str(tmp_path / "runs/model"), promote_alias="latest",
                                                 promote_manual_runs=True, retries=0)  # fmt: skip
        evaluate >> register
    run = run_dag(dag, mark_success_pattern="^evaluate$", run_after=RUN_AFTER, logical_date=RUN_AFTER, **run_kwargs)
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def verdict(tmp_path: Path, model: Path, passed: bool, dag_id: str, monkeypatch, run: str | None = None) -> Path:
    """The verdict this run's evaluation job (of run ``run``: another run's) would write, sealed with its key."""
    monkeypatch.setenv(boundary.ENV_EVIDENCE_KEY, job_key(job_name(dag_id, "evaluate", run or run_id())))
    write_verdict((tmp_path / "evaluation").as_uri(), model_uri=model.as_uri(), metric="accuracy",
                  value=0.97 if passed else 0.4958, threshold=0.9, comparison=">=")  # fmt: skip
    return tmp_path / "evaluation" / boundary.VERDICT_FILE


@pytest.fixture
def root(tmp_path, monkeypatch) -> str:
    root = (tmp_path / "root").as_uri()
    set_trainium_connection(monkeypatch, artifact_root=root)
    return root


@pytest.mark.parametrize("case", ["no verdict", "failed", "other files", "passed flipped", "another run's job"])
def test_a_marked_success_evaluation_promotes_nothing(tmp_path, root, monkeypatch, case):
    model = model_dir(tmp_path)
    dag_id = "evidence_" + "".join(c if c.isalnum() else "_" for c in case)
    if case in ("failed", "passed flipped"):
        written = verdict(tmp_path, model, False, dag_id, monkeypatch)
        if case == "passed flipped":  # what a job with write access to the run's prefix did (0.4958 < 0.9)
            written.write_text(json.dumps({**json.loads(written.read_text()), "passed": True}))
    if case == "other files":
        verdict(tmp_path, model, True, dag_id, monkeypatch)
        (model / "model.safetensors").write_bytes(b"\x03" * 64)  # not what was judged
    if case == "another run's job":  # its own verdict, correctly sealed, planted under this run's evaluation
        verdict(tmp_path, model, True, dag_id, monkeypatch, run="manual__2025-01-01T00:00:00+00:00")
    states = run_register(tmp_path, dag_id)
    assert states == {"evaluate": "success", "register": "failed"}
    assert ModelRegistry(root).list_models() == []


def test_a_passing_verdict_for_these_files_registers_and_promotes(tmp_path, root, monkeypatch):
    model = model_dir(tmp_path)
    verdict(tmp_path, model, True, "evidence_passed", monkeypatch)
    assert run_register(tmp_path, "evidence_passed") == {"evaluate": "success", "register": "success"}
    assert ModelRegistry(root).get_alias("m", "latest").version == 1


# --- The swapped hold-out set: a job replaces the set between the data task and the evaluation ----------------


def prepare_holdout(tmp_path: Path, dag_id: str, monkeypatch) -> str:
    """What this run's ``prepare_holdout`` job writes (the data code itself, with that job's key): the set, its
    manifest and the manifest sealed by the job."""
    from trainium_trainer.llama.data import prepare

    holdout = (tmp_path / "holdout").as_uri()
    monkeypatch.setenv(boundary.ENV_EVIDENCE_KEY, job_key(job_name(dag_id, "prepare_holdout", run_id())))
    prepare(holdout, synthetic_date="2025-12-31", synthetic_records=60, tokenizer_uri=str(tmp_path / "tok.json"),
            train_new_tokenizer=True, holdout_manifest=True)  # fmt: skip
    return holdout


def swap_holdout(holdout: str) -> None:
    """What a job with write access to the shared prefix does: the held-out blocks replaced by easy ones (all
    padding), index and manifest rewritten to match, so the evaluation's own check passes."""
    import hashlib

    import numpy as np

    from trainium_trainer.common.holdout import manifest
    from trainium_trainer.llama.data import npy_bytes

    root = Path(holdout.removeprefix("file://"))
    index = json.loads((root / boundary.DATA_INDEX_FILE).read_text())
    files = {}
    for shard in index["eval"]:
        easy = npy_bytes(np.zeros((shard["blocks"], index["block_size"]), dtype=np.int64))
        (root / shard["file"]).write_bytes(easy)
        shard["sha256"] = hashlib.sha256(easy).hexdigest()
        files[shard["file"]] = easy
    (root / boundary.DATA_INDEX_FILE).write_text(json.dumps(index))
    listed = json.loads((root / boundary.HOLDOUT_MANIFEST_FILE).read_text())["files"]
    files |= {name: (root / name).read_bytes() for name in listed if name not in files}
    (root / boundary.HOLDOUT_MANIFEST_FILE).write_text(json.dumps(manifest(files)))


def evaluate_on(holdout: str, tmp_path: Path, model: Path, dag_id: str, monkeypatch, fingerprint: bool = True) -> None:
    """What this run's evaluation job writes: it reads the set as the evaluation does (every file checked against the
    manifest) and writes a passing verdict naming the manifest's fingerprint (``fingerprint=False``: a verdict of
    before hold-out sets were sealed)."""
    from trainium_trainer.common.holdout import read_holdout
    from trainium_trainer.llama.data import load_blocks

    files, held = read_holdout(holdout)
    assert len(load_blocks(holdout, "eval", files)) > 0
    monkeypatch.setenv(boundary.ENV_EVIDENCE_KEY, job_key(job_name(dag_id, "evaluate", run_id())))
    write_verdict((tmp_path / "evaluation").as_uri(), model_uri=model.as_uri(), metric="eval_loss", value=1.0,
                  threshold=2.0, comparison="<", holdout_fingerprint=held if fingerprint else None)  # fmt: skip


def run_register_with_holdout(tmp_path: Path, dag_id: str):
    """The fine-tune DAG's evidence tasks: ``prepare_holdout`` and ``evaluate`` jobs (marked success: their writes
    are the test's, as above), then ``register`` checking the verdict and the hold-out set's seal."""
    from airflow.sdk import DAG

    from airflow_provider_trainium.operators.job import TrainiumJobOperator
    from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator

    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        holdout = TrainiumJobOperator(task_id="prepare_holdout", entry_point="trainium_trainer.llama.data",
                                      distributed=False, compute="local",
                                      output_uri=(tmp_path / "holdout").as_uri())  # fmt: skip
        evaluate = TrainiumJobOperator(task_id="evaluate", entry_point="trainium_trainer.llama.evaluate",
                                       distributed=False, compute="local",
                                       output_uri=(tmp_path / "evaluation").as_uri())  # fmt: skip
        register = TrainiumRegisterModelOperator(task_id="register", model_name="m",
                                                 source_uri=str(tmp_path / "runs/model"), promote_alias="latest",
                                                 promote_manual_runs=True, holdout_task_id="prepare_holdout",
                                                 retries=0)  # fmt: skip
        holdout >> evaluate >> register
    run = run_dag(dag, mark_success_pattern="^(prepare_holdout|evaluate)$", run_after=RUN_AFTER,
                  logical_date=RUN_AFTER)  # fmt: skip
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("swapped", "the hold-out files were replaced between the data task and the evaluation"),
        ("another run's set", "is not sealed by data job holdout_another_run_s_set-prepare_holdout-"),
        ("no fingerprint", "names no hold-out set"),
    ],
)
def test_a_verdict_on_another_holdout_set_registers_nothing(tmp_path, root, monkeypatch, capfd, case, reason):
    model = model_dir(tmp_path)
    dag_id = "holdout_" + "".join(c if c.isalnum() else "_" for c in case)
    holdout = prepare_holdout(tmp_path, dag_id, monkeypatch)
    if case == "swapped":  # between the data task and the evaluation
        swap_holdout(holdout)
    if case == "another run's set":  # this run's seal replaced by the copy of another run's data job
        other = prepare_holdout(tmp_path / "other", "another_dag", monkeypatch)
        seals = tmp_path / "holdout" / boundary.HOLDOUT_SEALS_DIR
        (mine,) = seals.iterdir()
        swap_holdout(other)
        monkeypatch.setenv(boundary.ENV_EVIDENCE_KEY, job_key(job_name("another_dag", "prepare_holdout", run_id())))
        other_root = tmp_path / "other" / "holdout"
        listed = json.loads((other_root / boundary.HOLDOUT_MANIFEST_FILE).read_text())["files"]
        write_manifest(other_root.as_uri(), {name: (other_root / name).read_bytes() for name in listed})
        for name in [*listed, boundary.HOLDOUT_MANIFEST_FILE]:
            (tmp_path / "holdout" / name).write_bytes((other_root / name).read_bytes())
        mine.write_bytes(next((other_root / boundary.HOLDOUT_SEALS_DIR).iterdir()).read_bytes())
    evaluate_on(holdout, tmp_path, model, dag_id, monkeypatch, fingerprint=case != "no fingerprint")
    assert run_register_with_holdout(tmp_path, dag_id) == {
        "prepare_holdout": "success",
        "evaluate": "success",
        "register": "failed",
    }
    assert reason in capfd.readouterr().out
    assert ModelRegistry(root).list_models() == []


def test_a_verdict_on_this_runs_sealed_holdout_set_registers_and_promotes(tmp_path, root, monkeypatch):
    model = model_dir(tmp_path)
    holdout = prepare_holdout(tmp_path, "holdout_kept", monkeypatch)
    prepare_holdout(tmp_path, "holdout_kept_backfill", monkeypatch)  # another run prepares the same set meanwhile
    evaluate_on(holdout, tmp_path, model, "holdout_kept", monkeypatch)
    assert run_register_with_holdout(tmp_path, "holdout_kept") == {
        "prepare_holdout": "success",
        "evaluate": "success",
        "register": "success",
    }
    assert ModelRegistry(root).get_alias("m", "latest").version == 1
