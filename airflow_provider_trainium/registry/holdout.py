"""Evidence of what a verdict was judged on: the hold-out set's manifest, as this run's data job sealed it.

A verdict sealed by the evaluation job proves what the evaluation saw, not that what it saw was the hold-out set:
the set lives under a prefix every job may write, so a job could swap its files (for easy ones, or training data)
between the data task and the evaluation. The data job records the sha256 of every file it wrote in a manifest
and seals a copy with its own evidence key, under ``holdout-seals/<key id>.json``
(``trainium_trainer.common.holdout``); the evaluation checks the files against the manifest and names the
manifest's fingerprint in its verdict. Registering and promoting re-derive the key of this run's data job from its
job name (as ``verdict.check_verdict`` does for the evaluation), check that job's sealed copy and require the
verdict to name its fingerprint (``check_holdout``). The manifest is the same for every run that prepares the same
set (only the seal differs), so a retry or a backfill of an interval checks against its own data job's seal.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_trainium.registry.verdict import VerdictError, read_record, sealed_record
from trainium_trainer import boundary

#: The verdict field naming the fingerprint of the hold-out manifest the model was judged on.
VERDICT_FIELD = "holdout_fingerprint"


def seal_uri(holdout_uri: str, job_name: str) -> str:
    """Where the data job named ``job_name`` keeps its sealed copy of the manifest of ``holdout_uri``."""
    from airflow_provider_trainium.registry.seal import job_key

    return f"{holdout_uri.rstrip('/')}/{boundary.HOLDOUT_SEALS_DIR}/{boundary.key_id(job_key(job_name))}.json"


def read_sealed_manifest(
    holdout_uri: str, *, aws_conn_id: str | None = None, trainium_conn_id: str | None = None
) -> Any:
    """The sealed copy at ``holdout_uri`` (None when there is none)."""
    return read_record(holdout_uri, "a hold-out manifest", aws_conn_id=aws_conn_id, trainium_conn_id=trainium_conn_id)


def sealed_fingerprint(manifest: Any, where: str, job_name: str) -> str:
    """The fingerprint of ``manifest`` (read from ``where``), when the data job named ``job_name`` sealed it; else
    VerdictError."""
    missing = f"no hold-out manifest sealed by data job {job_name}: nothing says what the evaluation judged on"
    sealed_record(manifest, where, boundary.HOLDOUT_MANIFEST_FORMAT, "data job", job_name, missing)
    return boundary.record_fingerprint(manifest)


def check_holdout(verdict: dict[str, Any], expected: str, where: str, holdout_task_id: str) -> None:
    """VerdictError unless ``verdict`` (read from ``where``) names the hold-out fingerprint ``expected``, the one
    task ``holdout_task_id``'s job sealed."""
    judged = verdict.get(VERDICT_FIELD)
    if judged is None:
        raise VerdictError(f"the verdict at {where} names no hold-out set (written before hold-out sets were sealed, "
                           f"or by an evaluation that found no manifest): it cannot show the model was judged on the "
                           f"set {holdout_task_id!r} sealed; rerun the data task and the evaluation")  # fmt: skip
    if judged != expected:
        raise VerdictError(f"the verdict at {where} judged hold-out set {str(judged)[:12]}..., not the one "
                           f"{holdout_task_id!r} sealed ({expected[:12]}...): the hold-out files were replaced "
                           "between the data task and the evaluation")  # fmt: skip


def require_holdout(
    verdict: dict[str, Any], where: str, holdout_uri: str, job_name: str, holdout_task_id: str,
    trainium_conn_id: str | None = None, aws_conn_id: str | None = None,
) -> str:  # fmt: skip
    """Check ``verdict`` against the manifest the data job named ``job_name`` sealed under ``holdout_uri``; returns
    the fingerprint both name."""
    seal_at = seal_uri(holdout_uri, job_name)
    found = read_sealed_manifest(seal_at, aws_conn_id=aws_conn_id, trainium_conn_id=trainium_conn_id)
    expected = sealed_fingerprint(found, seal_at, job_name)
    check_holdout(verdict, expected, where, holdout_task_id)
    return expected
