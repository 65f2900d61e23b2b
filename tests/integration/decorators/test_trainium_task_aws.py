"""``@task.trainium`` on ECS and Batch against the moto server: what each platform is asked to run.

moto runs no container, so the check is on the request: the launcher's arguments run the in-image function
runner under torchrun on every node, the run's environment names the code bundle, and the bundle in S3 holds
the function without its decorator and its call as JSON. ``tests/integration/image/test_function_in_image.py``
runs that same request in the built image.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_trainium.decorators.trainium import RUNNER_COMMAND, _TrainiumDecoratedOperator
from tests.integration.batch.conftest import batch_env  # noqa: F401 - fixture
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn, context
from tests.integration.ecs.conftest import ecs_world, task_progress  # noqa: F401 - fixtures
from trainium_trainer import boundary


def summarize(values: list[int], scale: float = 1.0) -> dict:
    import os

    return {"rank": int(os.environ["RANK"]), "world": int(os.environ["WORLD_SIZE"]), "total": sum(values) * scale}


def decorated(**kwargs: Any) -> _TrainiumDecoratedOperator:
    return _TrainiumDecoratedOperator(python_callable=summarize, task_id="summarize", op_args=[[1, 2, 3]],
                                      op_kwargs={"scale": 2.0}, execution_timeout=timedelta(hours=1),
                                      **kwargs)  # fmt: skip


def submit(operator: _TrainiumDecoratedOperator, event: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the task until it defers; the job's handle and the parameters of the API call ``event`` names."""
    from airflow.sdk.exceptions import TaskDeferred

    ti = TaskInstanceStandIn(dag_id="trainium_function", task_id="summarize")
    sent: dict[str, Any] = {}
    if event:
        prepared = operator.prepare(context(ti))
        client = operator.backend_for(prepared.compute).hook.client
        client.meta.events.register(event, lambda params, **_: sent.update(params))
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context(ti))
    return deferred.value.trigger.handle, sent


def bundle_files(aws_conn_id: str, code_uri: str) -> dict[str, str]:
    """Every file of the bundle at ``code_uri`` (relative name -> text), read back from S3."""
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    bucket, _, prefix = code_uri.removeprefix("s3://").partition("/")
    hook = S3Hook(aws_conn_id=aws_conn_id)
    keys = hook.list_keys(bucket_name=bucket, prefix=prefix + "/")
    return {key[len(prefix) + 1 :]: hook.read_key(key, bucket) for key in keys}


def assert_runs_the_function(command: list[str], env: dict[str, str], aws_conn_id: str) -> dict[str, str]:
    at = command.index("--")
    assert "--command" in command[:at] and "--user-code" in command[:at]
    assert command[at + 1 :] == list(RUNNER_COMMAND)
    files = bundle_files(aws_conn_id, env[boundary.ENV_CODE_URI])
    source = files[f"{boundary.FUNCTION_BUNDLE_DIR}/{boundary.FUNCTION_SOURCE_FILE}"]
    assert source.startswith("def summarize(") and "@task" not in source
    call = json.loads(files[f"{boundary.FUNCTION_BUNDLE_DIR}/{boundary.FUNCTION_CALL_FILE}"])
    assert call == {"function": "summarize", "args": [[1, 2, 3]], "kwargs": {"scale": 2.0}}
    return files


def test_on_batch_every_node_runs_the_function_runner(batch_env, aws_conn_id):  # noqa: F811
    handle, request = submit(decorated(compute="batch", instance_type="trn1.32xlarge", nodes=2),
                             "provide-client-params.batch.SubmitJob")  # fmt: skip
    assert batch_env.batch.describe_jobs(jobs=[handle["job_id"]])["jobs"][0]["jobName"] == request["jobName"]
    (override,) = request["nodeOverrides"]["nodePropertyOverrides"]
    container = override["containerOverrides"]
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert "--nodes=2" in container["command"] and "--nproc-per-node=32" in container["command"]
    assert_runs_the_function(container["command"], env, aws_conn_id)


def test_on_ecs_the_task_runs_the_function_runner(ecs_world, task_progress, monkeypatch, aws_conn_id):  # noqa: F811
    from tests.integration.ecs.conftest import CLUSTER, connect_trainium

    task_progress({"progression": "immediate"})
    ecs_world.add_instance("trn1.2xlarge")
    connect_trainium(ecs_world, monkeypatch)
    handle, _ = submit(decorated(compute="ecs", instance_type="trn1.2xlarge"))
    (task,) = ecs_world.ecs.describe_tasks(cluster=CLUSTER, tasks=[handle["job_id"]])["tasks"]
    (override,) = task["overrides"]["containerOverrides"]
    env = {e["name"]: e["value"] for e in override["environment"]}
    assert "--nproc-per-node=2" in override["command"]
    assert_runs_the_function(override["command"], env, aws_conn_id)
