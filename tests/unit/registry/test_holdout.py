"""A verdict counts only on the hold-out set this run's data job sealed: a manifest edited, a set swapped after the
data job (files and manifest alike), another set's fingerprint or none at all registers and promotes nothing."""

from __future__ import annotations

import json

import pytest

from airflow_provider_trainium.registry.holdout import check_holdout, require_holdout, seal_uri, sealed_fingerprint
from airflow_provider_trainium.registry.seal import job_key, sealed
from airflow_provider_trainium.registry.verdict import VerdictError, check_verdict
from trainium_trainer import boundary
from trainium_trainer.common.holdout import manifest, read_holdout, write_manifest
from trainium_trainer.common.verdict import write_verdict

HOLDOUT_JOB = "trainium_llama_finetune-prepare_holdout-0123456789ab"
EVAL_JOB = "trainium_llama_finetune-evaluate-0123456789ab"
FILES = {"index.json": b'{"eval": []}', "eval/shard-00000.npy": b"\x01" * 32}


def prepare(root, monkeypatch, files=FILES, job=HOLDOUT_JOB) -> None:
    """What the data job named ``job`` writes: the files, the manifest and its sealed copy."""
    monkeypatch.setenv(boundary.ENV_EVIDENCE_KEY, job_key(job))
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    write_manifest(root.as_uri(), files)


def evaluate(root, tmp_path, monkeypatch) -> dict:
    """What the evaluation job writes: its verdict (passing), naming the fingerprint of the set it read."""
    _, fingerprint = read_holdout(root.as_uri())
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "model.safetensors").write_bytes(b"\x02" * 8)
    monkeypatch.setenv(boundary.ENV_EVIDENCE_KEY, job_key(EVAL_JOB))
    return write_verdict((tmp_path / "eval").as_uri(), model_uri=model.as_uri(), metric="eval_loss", value=1.0,
                         threshold=2.0, comparison="<", holdout_fingerprint=fingerprint)  # fmt: skip


def register_check(verdict: dict, root) -> str:
    """What registering checks: the evaluation's seal, then the hold-out set this run's data job sealed."""
    checked = check_verdict(verdict, None, "eval", EVAL_JOB)
    return require_holdout(checked, "eval", root.as_uri(), HOLDOUT_JOB, "prepare_holdout")


def test_a_verdict_on_the_sealed_set_is_the_one_that_counts(tmp_path, monkeypatch):
    root = tmp_path / "holdout"
    prepare(root, monkeypatch)
    verdict = evaluate(root, tmp_path, monkeypatch)
    assert (
        register_check(verdict, root) == verdict["holdout_fingerprint"] == boundary.record_fingerprint(manifest(FILES))
    )
    prepare(root, monkeypatch, job=HOLDOUT_JOB.replace("0123", "ffff"))  # another run re-prepares the same set
    assert register_check(verdict, root) == verdict["holdout_fingerprint"]  # its seal sits beside, not over, ours


def test_a_set_swapped_with_its_manifest_after_the_data_job_registers_nothing(tmp_path, monkeypatch):
    root = tmp_path / "holdout"
    prepare(root, monkeypatch)
    easy = {**FILES, "eval/shard-00000.npy": b"\x00" * 32}
    for name, data in easy.items():  # a job with write access to the prefix: easy files and a matching manifest
        (root / name).write_bytes(data)
    (root / boundary.HOLDOUT_MANIFEST_FILE).write_text(json.dumps(manifest(easy)))
    verdict = evaluate(root, tmp_path, monkeypatch)  # the evaluation honestly judged the easy set
    with pytest.raises(VerdictError, match="not the one 'prepare_holdout' sealed.*replaced between the data task"):
        register_check(verdict, root)


def forge_sealed_copy(root, forge) -> None:
    where = root / seal_uri("", HOLDOUT_JOB).lstrip("/")
    where.write_text(json.dumps(forge(json.loads(where.read_text()), root)))


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(
            lambda m, r: {**m, "files": {**m["files"], "eval/shard-00000.npy": {"size": 32, "sha256": "0"}}},
            id="the sealed manifest edited",
        ),  # fmt: skip
        pytest.param(lambda m, r: {k: v for k, v in m.items() if k != boundary.SEAL_FIELD}, id="its seal removed"),
        pytest.param(
            lambda m, r: sealed(
                {k: v for k, v in m.items() if k != boundary.SEAL_FIELD}, job_key(HOLDOUT_JOB.replace("0123", "ffff"))
            ),
            id="sealed by another run's data job",
        ),  # fmt: skip
    ],
)
def test_a_sealed_manifest_not_as_this_runs_data_job_sealed_it_registers_nothing(tmp_path, monkeypatch, forge):
    root = tmp_path / "holdout"
    prepare(root, monkeypatch)
    verdict = evaluate(root, tmp_path, monkeypatch)
    forge_sealed_copy(root, forge)
    with pytest.raises(VerdictError, match=f"not sealed by data job {HOLDOUT_JOB}"):
        register_check(verdict, root)


def test_no_sealed_manifest_of_this_runs_data_job_registers_nothing(tmp_path, monkeypatch):
    root = tmp_path / "holdout"
    prepare(root, monkeypatch, job=HOLDOUT_JOB.replace("0123", "ffff"))  # only another run's data job ran
    verdict = evaluate(root, tmp_path, monkeypatch)
    with pytest.raises(VerdictError, match=f"no hold-out manifest sealed by data job {HOLDOUT_JOB}"):
        register_check(verdict, root)


def test_a_verdict_of_before_hold_out_sets_were_sealed_registers_nothing(tmp_path, monkeypatch):
    root = tmp_path / "holdout"
    prepare(root, monkeypatch)
    verdict = evaluate(root, tmp_path, monkeypatch)
    older = sealed({k: v for k, v in verdict.items() if k not in ("holdout_fingerprint", "seal")}, job_key(EVAL_JOB))
    with pytest.raises(VerdictError, match="names no hold-out set"):
        register_check(older, root)


def test_a_verdict_naming_another_set_or_none_registers_nothing(tmp_path, monkeypatch):
    expected = boundary.record_fingerprint(manifest(FILES))
    other = boundary.record_fingerprint(manifest({**FILES, "index.json": b"{}"}))
    with pytest.raises(VerdictError, match="replaced between the data task and the evaluation"):
        check_holdout({"holdout_fingerprint": other}, expected, "eval", "prepare_holdout")
    with pytest.raises(VerdictError, match="names no hold-out set.*rerun the data task and the evaluation"):
        check_holdout({}, expected, "eval", "prepare_holdout")  # a verdict written before sets were sealed
    check_holdout({"holdout_fingerprint": expected}, expected, "eval", "prepare_holdout")
    with pytest.raises(VerdictError, match="not a trainium-holdout/1 record"):
        sealed_fingerprint({"format": "x"}, "w", HOLDOUT_JOB)
