"""``TrainiumTrainingOperator`` with a compile cache on local compute: after a compile task recorded the cache, a
training job is refused before it is submitted when an entry changed or went missing since, and the cache is
recorded again when a job with it ends (the job writes the cache itself)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from airflow_provider_trainium import compile_manifest
from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.operators.training import TrainiumTrainingOperator
from tests.conftest import write_tree
from tests.unit.operators.test_compile import JOB, compiled, connect, finished
from tests.unit.operators.test_job import context


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return connect(tmp_path, monkeypatch)


def training(cache: Path) -> TrainiumTrainingOperator:
    return TrainiumTrainingOperator(task_id="train", compile_cache_uri=cache.as_uri(), **JOB)


@pytest.fixture
def submitted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The jobs local compute was asked to start (none is started)."""
    names: list[str] = []

    def submit(self: LocalBackend, spec: object, name: str, tags: object) -> None:
        names.append(name)
        pytest.fail(f"job {name} was submitted")

    monkeypatch.setattr(LocalBackend, "submit", submit)
    return names


@pytest.mark.parametrize(
    ("tamper", "refusal"),
    [(lambda cache: (cache / "rank0" / "1229").write_bytes(b"planted"), r"1 entry changed \(rank0/1229\)"),
     (lambda cache: (cache / "rank1" / "1229").unlink(), r"1 entry removed \(rank1/1229\)")],
    ids=["entry changed", "entry removed"],
)  # fmt: skip
def test_a_cache_changed_after_the_compile_task_refuses_the_training_job_before_submit(
    root, submitted, tamper, refusal
):
    cache, _ = compiled()
    tamper(cache)
    op = training(cache)
    op.pre_execute(context())
    with pytest.raises(AirflowFailException, match=rf"(?s){refusal} since d/.* recorded it.*the compile task again"):
        op.execute(context())
    assert submitted == []


def test_an_untouched_cache_and_one_with_entries_added_pass(root):
    cache, _ = compiled()
    training(cache).prepare(context())
    write_tree(cache, {"rank0/5150": b"an eval graph the last training run compiled"})
    op = training(cache)
    op.prepare(context())
    assert op._cache_changes is not None and op._cache_changes.added == ("rank0/5150",)


@pytest.mark.parametrize("end", [JobState.SUCCEEDED, JobState.FAILED])
def test_the_cache_is_recorded_again_when_a_training_job_ends(root, end):
    """On local CPU compute torch-xla rewrites every entry it finds: the next job is compared with what this one
    left, whether it succeeded or failed (its retry uses the same cache)."""
    cache, key = compiled()
    op = training(cache)

    def job() -> None:
        write_tree(cache, {"rank0/1229": b"rewritten by the job"})

    if end is JobState.SUCCEEDED:
        finished(op, context(), end, job)
    else:
        with pytest.raises(AirflowException):
            finished(op, context(), end, job)
    manifest = compile_manifest.read_manifest(root, cache.as_uri())
    assert manifest is not None and set(manifest["keys"]) == {key}
    assert manifest["entries"]["rank0/1229"]["sha256"] == hashlib.sha256(b"rewritten by the job").hexdigest()
    training(cache).prepare(context())  # the next job's check passes


def test_a_cache_no_compile_task_recorded_is_used_with_a_warning_and_left_unrecorded(root, tmp_path):
    from structlog.testing import capture_logs

    cache = write_tree(tmp_path / "warm-by-training", {"rank0/1": b"x"})
    with capture_logs() as logs:
        finished(training(cache), context())
    warnings = [e["event"] for e in logs if e["log_level"] == "warning"]
    assert any("has no manifest" in w and "unverified" in w for w in warnings), warnings
    assert compile_manifest.read_manifest(root, cache.as_uri()) is None
