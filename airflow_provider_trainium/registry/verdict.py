"""Evidence for registering and promoting a model: the evaluation job's verdict record, checked against the files.

Airflow's task states are not evidence: whoever may edit task instances can mark a failed ``evaluate`` as a
success. The evaluation job itself writes ``verdict.json`` to its own output location
(``trainium_trainer.common.verdict``):
the metric, the threshold, pass or fail, and the fingerprint of the files it judged (the registry's formula,
``boundary.model_fingerprint``), sealed with the evaluation job's own key (``registry.seal``). Registering and
promoting re-read it and refuse a model whose verdict is missing, unsealed or sealed by another key (edited, or
written by any other job), computed for other files, or failing: pass or fail is recomputed from the sealed value,
comparison and threshold, never taken from the record's ``passed`` flag (``check_verdict``).
"""

from __future__ import annotations

import json
from typing import Any, TypeGuard

from airflow_provider_trainium.registry.errors import RegistryError
from trainium_trainer import boundary


class VerdictError(RegistryError, ValueError):
    """No passing verdict for these very files: nothing is registered or promoted (a retry changes nothing)."""


def verdict_uri(evaluation_uri: str) -> str:
    """Where an evaluation job whose output location is ``evaluation_uri`` writes its verdict."""
    return f"{evaluation_uri.rstrip('/')}/{boundary.VERDICT_FILE}"


def read_record(uri: str, what: str, *, aws_conn_id: str | None = None, trainium_conn_id: str | None = None) -> Any:
    """The JSON record at ``uri`` (None when there is none), read with the connection's credentials like every
    artifact; VerdictError naming ``what`` it should be when it is not JSON."""
    from airflow_provider_trainium import artifacts
    from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID

    data = artifacts.read_bytes(uri, missing_ok=True, aws_conn_id=aws_conn_id,
                                trainium_conn_id=trainium_conn_id or DEFAULT_CONN_ID)  # fmt: skip
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError as err:
        raise VerdictError(f"{uri} is not {what}: {err}") from err


def read_verdict(evaluation_uri: str, *, aws_conn_id: str | None = None, trainium_conn_id: str | None = None) -> Any:
    """The verdict record under ``evaluation_uri`` (None when there is none)."""
    return read_record(verdict_uri(evaluation_uri), "a verdict record", aws_conn_id=aws_conn_id,
                       trainium_conn_id=trainium_conn_id)  # fmt: skip


def sealed_record(record: Any, where: str, record_format: str, sealed_by: str, job_name: str, missing: str) -> None:
    """VerdictError unless ``record`` (read from ``where``) is a ``record_format`` record that the job named
    ``job_name`` (``sealed_by``: "evaluation job", "data job") sealed; ``missing`` says why its absence matters."""
    from airflow_provider_trainium.registry.seal import job_key, seal_holds

    if record is None:
        raise VerdictError(f"nothing at {where}: {missing}")
    if not isinstance(record, dict) or record.get("format") != record_format:
        raise VerdictError(f"{where} is not a {record_format} record")
    if not seal_holds(record, job_key(job_name)):
        raise VerdictError(f"the record at {where} is not sealed by {sealed_by} {job_name}: edited, or written by "
                           "another job")  # fmt: skip


def check_verdict(
    verdict: Any, fingerprint: str | None, evaluation_uri: str, job_name: str, must_pass: bool = True
) -> dict[str, Any]:
    """The verdict, when the job named ``job_name`` sealed it, it judged the files whose fingerprint is
    ``fingerprint`` (None: any) and (``must_pass``) its numbers pass; else VerdictError."""
    where = verdict_uri(evaluation_uri)
    missing = "no verdict: the evaluation job did not judge this model (task states are not evidence)"
    sealed_record(verdict, where, boundary.VERDICT_FORMAT, "evaluation job", job_name, missing)
    record: dict[str, Any] = {**verdict, "passed": verdict_passes(verdict)}
    judged = record.get("model_fingerprint")
    if fingerprint is not None and judged != fingerprint:
        raise VerdictError(f"the verdict at {where} judged model files {str(judged)[:12]}..., not these "
                           f"({str(fingerprint)[:12]}...): it says nothing about them")  # fmt: skip
    if must_pass and record.get("passed") is not True:
        raise VerdictError(f"the verdict at {where} failed the model: {record.get('metric')} {record.get('value')} "
                           f"(needs {record.get('comparison')} {record.get('threshold')})")  # fmt: skip
    return record


def verdict_passes(verdict: dict[str, Any]) -> bool:
    """Pass or fail from the verdict's own numbers (``boundary.passes``), whatever its ``passed`` flag says."""
    value, threshold = verdict.get("value"), verdict.get("threshold")
    return _number(value) and _number(threshold) and boundary.passes(value, str(verdict.get("comparison")), threshold)


def _number(value: object) -> TypeGuard[float]:
    """An int or a float; not a bool (JSON's true is no number here)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def files_fingerprint(path: Any) -> str:
    """The registry's fingerprint of the files under ``path`` (an ObjectStoragePath), what a version records."""
    from airflow_provider_trainium.registry.hashing import RUN_BOOKKEEPING, fingerprint, hash_tree

    return fingerprint(hash_tree(path, skip=RUN_BOOKKEEPING))


def describe(verdict: dict[str, Any]) -> str:
    """One line for the log: ``accuracy 0.97 >= 0.9: passed``."""
    state = "passed" if verdict.get("passed") else "failed"
    metric, value = verdict.get("metric"), verdict.get("value")
    return f"{metric} {value} {verdict.get('comparison')} {verdict.get('threshold')}: {state}"
