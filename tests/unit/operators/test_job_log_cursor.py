"""The operator hands its trigger the cursor of the job it pushed: the serialized row (all a restarted
triggerer has) names ``<output_uri>/.trainium/log-cursor-<job id>.json``; without it every line is repeated."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.compute.cloudwatch import cursor_uri
from airflow_provider_trainium.compute.watch import trigger_from
from tests.unit.operators.test_job import context, watched


def test_the_serialized_trigger_carries_the_cursor_of_the_pushed_job(monkeypatch, tmp_path):
    from airflow.sdk.exceptions import TaskDeferred

    op, _ = watched(monkeypatch, tmp_path)
    ctx = context()
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(ctx)
    pushed = ctx["ti"].xcoms["job"]
    expected = cursor_uri(deferred.value.kwargs["prepared"]["spec"]["output_uri"], pushed["job_id"])
    assert expected == "s3://b/out/.trainium/log-cursor-job-7.json"

    classpath, row = deferred.value.trigger.serialize()
    assert row["watch"]["log_cursor_uri"] == expected
    assert trigger_from(classpath, row).watch().log_cursor_uri == expected  # what a restarted triggerer rebuilds
