"""A deferred Batch task hands its trigger the log cursor of the job it pushed: the row the triggerer stores
names ``<output_uri>/.trainium/log-cursor-<job id>.json``, so a restarted triggerer (which has only that row)
resumes the job's log where it stopped instead of repeating every line.

Real operator, real Batch backend on the moto server, real trigger class; the triggerer's restart is the
trigger rebuilt from its serialized kwargs, as the triggerer does from its table.
"""

from __future__ import annotations

import pytest

from airflow_provider_trainium.compute.cloudwatch import cursor_uri
from airflow_provider_trainium.compute.watch import trigger_from
from airflow_provider_trainium.operators.prepared_job import PreparedJob
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn, context, operator


def test_the_stored_trigger_row_carries_the_cursor_of_the_job_it_pushed(batch_env):
    from airflow.sdk.exceptions import TaskDeferred

    ti = TaskInstanceStandIn()
    with pytest.raises(TaskDeferred) as deferred:
        operator().execute(context(ti))
    pushed = ti.xcoms["job"]  # the record pushed before deferring
    spec = PreparedJob.from_dict(deferred.value.kwargs["prepared"]).spec
    expected = cursor_uri(spec.output_uri, pushed["job_id"])
    assert expected is not None and expected.startswith(spec.output_uri.rstrip("/") + "/.trainium/log-cursor-")

    classpath, row = deferred.value.trigger.serialize()  # what the triggerer stores
    assert row["watch"]["log_cursor_uri"] == expected
    assert row["watch"]["handle"]["job_id"] == pushed["job_id"]

    restarted = trigger_from(classpath, row)  # the triggerer restarted: only the stored row is left
    assert restarted.watch().log_cursor_uri == expected
    assert restarted.serialize() == (classpath, row)
