"""TrainiumJobSensor ends its wait as the operator does: a job that failed on bad input fails without retry."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_trainium.compute.base import JobEvent, JobHandle, JobState
from airflow_provider_trainium.sensors.job import TrainiumJobSensor
from tests.conftest import set_trainium_connection

HANDLE = JobHandle("batch", "job-1", "job", {})


class DeferringStandIn:
    """The backend the job ran on, as far as the end of a deferred wait uses it."""

    name = "batch"
    defers = True


def ended(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, exit_code: int, reason: str) -> Exception:
    """What the sensor raises when its trigger fires the event of a job that failed with ``exit_code``."""
    from airflow.providers.common.compat.sdk import AirflowException

    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    sensor = TrainiumJobSensor(task_id="wait", job_task_id="train")
    sensor._backend = DeferringStandIn()  # type: ignore[assignment]
    event = JobEvent(HANDLE.to_dict(), JobState.FAILED, reason, exit_code, ("ERROR: --epochs must be > 0",))
    ti = SimpleNamespace(dag_id="d", task_id="wait", run_id="manual__2026-11-30T00:00:00+00:00", map_index=-1)
    with pytest.raises(AirflowException) as raised:
        sensor.execute_complete({"ti": ti}, event.to_dict())  # type: ignore[arg-type]
    return raised.value


def test_a_job_that_exited_65_fails_the_sensor_without_retry(monkeypatch, tmp_path):
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_trainium.operators.job_finish import EXIT_BAD_INPUT

    failed = ended(monkeypatch, tmp_path, EXIT_BAD_INPUT, "node 0 exited with code 65")
    assert isinstance(failed, AirflowFailException)
    assert "--epochs must be > 0" in str(failed) and "bad input: not retried" in str(failed)


def test_a_job_that_crashed_otherwise_fails_the_sensor_so_it_may_retry(monkeypatch, tmp_path):
    from airflow.providers.common.compat.sdk import AirflowFailException

    failed = ended(monkeypatch, tmp_path, 1, "node 0 exited with code 1")
    assert not isinstance(failed, AirflowFailException)
