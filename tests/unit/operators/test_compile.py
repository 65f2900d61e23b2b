"""``TrainiumCompileOperator`` and the cache's manifest on local compute: a finished trial records the cache where
only Airflow writes, and ``skip_if_cached`` trusts a key record only when that manifest names the key and the cache
still holds what it recorded. The jobs are finished as the wait does (no process runs); what a trial's job writes
into the cache is written by the test."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium import compile_manifest
from airflow_provider_trainium.compute.base import JobHandle, JobState, JobStatus
from airflow_provider_trainium.operators.compile import TrainiumCompileOperator, write_key_record
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.conftest import set_trainium_connection, write_tree
from tests.unit.operators.test_job import context
from trainium_trainer import boundary

JOB: dict[str, Any] = {"entry_point": "tests.integration.jobs.report_env", "compute": "local",
       "job_args": ["--data-uri", "s3://data-bucket/mnist/v3"]}  # fmt: skip
#: What the trial's job leaves in the cache: torch-xla's CPU cache, one folder per rank.
TRIAL: dict[str, str | bytes] = {"rank0/1229": b"graph-a", "rank1/1229": b"graph-a"}


def connect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The trainium connection, its artifact root in ``tmp_path``; returns the root."""
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri(), allowed_input_prefixes=["s3://data-bucket"])
    return tmp_path.as_uri()


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return connect(tmp_path, monkeypatch)


def finished(
    op: TrainiumJobOperator,
    ctx: dict[str, Any],
    state: JobState = JobState.SUCCEEDED,
    while_running: Callable[[], object] = lambda: None,
) -> Any:
    """Prepare ``op`` (its checks run), run ``while_running`` as its job would, and end the job in ``state`` as the
    wait does; the task's value."""
    op.pre_execute(ctx)
    prepared = op.prepare(ctx)
    while_running()
    handle = JobHandle(prepared.compute, "job-42", prepared.job_name, {"started_at": 1_800_000_000.0})
    op.remember(ctx, handle)
    return op.finish(ctx, prepared.spec, handle, JobStatus(state))


def cache_of(op: TrainiumJobOperator) -> Path:
    return Path(op.prepare(context()).spec.env[boundary.ENV_COMPILE_CACHE_URI].removeprefix("file://"))


def compiled(**kwargs: Any) -> tuple[Path, str]:
    """A compile task whose trial filled the cache with ``TRIAL``: the cache folder and the key it recorded."""
    op = TrainiumCompileOperator(task_id="compile", **JOB, **kwargs)
    write_tree(cache_of(op), TRIAL)
    result = finished(op, context())
    assert result["skipped"] is False
    return cache_of(op), result["cache_key"]


def test_a_finished_trial_records_the_cache_with_its_key_where_jobs_do_not_write(root):
    cache, key = compiled()
    manifest = compile_manifest.read_manifest(root, cache.as_uri())
    assert manifest is not None and set(manifest["keys"]) == {key}
    assert sorted(manifest["entries"]) == sorted(TRIAL)
    assert compile_manifest.manifest_uri(root, cache.as_uri()).startswith(f"{root}/compile-manifests/")


def test_skip_if_cached_skips_an_untouched_cache(root):
    compiled()
    again = TrainiumCompileOperator(task_id="compile", **JOB)
    again.pre_execute(context())
    assert again.execute(context())["skipped"] is True


def test_skip_if_cached_refuses_a_cache_whose_entry_changed_before_any_trial_reuses_it(root, monkeypatch):
    cache, _ = compiled()
    (cache / "rank0" / "1229").write_bytes(b"planted")
    monkeypatch.setattr(TrainiumJobOperator, "execute", lambda self, context: pytest.fail("a trial started"))
    from airflow.providers.common.compat.sdk import AirflowFailException

    again = TrainiumCompileOperator(task_id="compile", **JOB)
    again.pre_execute(context())
    with pytest.raises(AirflowFailException, match=r"changed \(rank0/1229\).*Delete the changed entries"):
        again.execute(context())


@pytest.mark.parametrize("case", ["entry removed", "key record forged, no manifest names it"])
def test_skip_if_cached_compiles_again_when_the_manifest_does_not_vouch_for_the_key(root, monkeypatch, case):
    cache, key = compiled()
    if case == "entry removed":
        (cache / "rank1" / "1229").unlink()
        trial_key = key
    else:  # a job writes the record of a key no compile task compiled
        again = TrainiumCompileOperator(task_id="compile", **JOB, cache_key_extra={"vocab": 7})
        trial_key = again.key_for(again.prepare(context()).spec, again.backend_for("local"))[0]
        write_key_record(cache.as_uri(), trial_key, {"key": trial_key}, None)
    ran: list[str] = []
    monkeypatch.setattr(TrainiumJobOperator, "execute", lambda self, context: ran.append(self.task_id) or "trial")
    extra = {"cache_key_extra": {"vocab": 7}} if case != "entry removed" else {}
    again = TrainiumCompileOperator(task_id="compile", **JOB, **extra)
    again.pre_execute(context())
    assert again.execute(context()) == "trial" and ran == ["compile"]
