"""Trusted images only: a job runs an image of the configured repository pinned by digest, or the image its
DAG run built; anything else is refused before any AWS call (0 RunTask, 0 SubmitJob)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.neuron.images import RULE, image_problem, repository_uri
from tests.dag_runs import states
from tests.integration.batch.conftest import IMAGE as BATCH_IMAGE
from tests.integration.batch.conftest import REPOSITORY as BATCH_REPOSITORY
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn, context, jobs_named, operator
from tests.integration.ecs.conftest import CLUSTER, REPOSITORY, connect_trainium
from tests.integration.registry.conftest import run_dag

DAGS = Path(__file__).resolve().parents[3] / "dags"
PUBLIC = "public.ecr.aws/docker/library/python@sha256:" + "0" * 64
DIGEST = "sha256:" + "ef" * 32


def test_the_rule():
    assert image_problem(f"{REPOSITORY}@{DIGEST}", REPOSITORY) is None
    assert "not pinned by digest" in image_problem(f"{REPOSITORY}:latest", REPOSITORY)
    assert "not in the configured repository" in image_problem(PUBLIC, REPOSITORY)
    assert "not in the configured repository" in image_problem(f"{REPOSITORY}-evil@{DIGEST}", REPOSITORY)
    assert "no ecr_repository" in image_problem(f"{REPOSITORY}@{DIGEST}", "")
    assert image_problem("localhost:5000/x@" + DIGEST, REPOSITORY, built=["localhost:5000/x@" + DIGEST]) is None
    assert RULE in image_problem("python:3.12", REPOSITORY)
    # a bare repository name is completed from the account of the connection's roles
    role = "arn:aws:iam::123456789012:role/trainium-job"
    assert repository_uri("trainium-training", "us-east-1", [role]) == REPOSITORY
    assert repository_uri("trainium-training", "us-east-1", []) == ""


def ecs_calls(world) -> tuple[list[str], list[str]]:
    """Tasks started and task definitions registered in the moto cluster: both empty means no RunTask."""
    return world.ecs.list_tasks(cluster=CLUSTER)["taskArns"], world.ecs.list_task_definitions()["taskDefinitionArns"]


def test_a_public_image_via_conf_is_refused_with_no_run_task(ecs_world, monkeypatch, tmp_path):
    from airflow.dag_processing.dagbag import DagBag

    ecs_world.add_instance("trn1.2xlarge")
    connect_trainium(ecs_world, monkeypatch)
    dag = DagBag(dag_folder=str(DAGS)).get_dag("trainium_mnist_mlp")

    run = dag.test(run_conf={"compute": "ecs", "image": PUBLIC})

    result = states(run)
    assert str(run.state) == "failed" and result["check_params"] == "failed"
    assert result["prepare_data"] == "upstream_failed"
    assert ecs_calls(ecs_world) == ([], [])


def test_the_job_operator_refuses_an_untrusted_image_before_any_aws_call(ecs_world, monkeypatch, tmp_path):
    """The first task is not the only guard: a job operator handed an untrusted image fails by itself."""
    from airflow.sdk import DAG

    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    ecs_world.add_instance("trn1.2xlarge")
    connect_trainium(ecs_world, monkeypatch)
    with DAG("untrusted_image_job", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        TrainiumJobOperator(task_id="job", entry_point="trainium_trainer.allreduce", distributed=False, compute="ecs",
                            image="{{ dag_run.conf['image'] }}", retries=0)  # fmt: skip
    run = run_dag(dag, run_conf={"image": PUBLIC})
    assert states(run) == {"job": "failed"}
    assert ecs_calls(ecs_world) == ([], [])


BUILT = f"registry.example.com:5000/trainium@{DIGEST}"


def run_build_then_job(ecs_world, monkeypatch, dag_id: str, xcom: str, **job: Any):
    """A run of a build task whose XCom says ``xcom`` while the registry holds BUILT for the run's sources, then
    a job on ECS whose image is that XCom; the run."""
    from airflow.sdk import DAG

    from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator
    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    class Build(TrainiumImageBuildOperator):
        def execute(self, context):  # the build itself is covered by tests/integration/image
            return xcom

        def derived_image(self):  # what the registry holds under this run's content-hash tag
            return BUILT, None, None

    ecs_world.add_instance("trn1.2xlarge")
    connect_trainium(ecs_world, monkeypatch)
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        build = Build(task_id="build_image")
        build >> TrainiumJobOperator(task_id="job", entry_point="trainium_trainer.allreduce", distributed=False,
                                     compute="ecs", image="{{ ti.xcom_pull(task_ids='build_image') }}", retries=0,
                                     **job)  # fmt: skip
    return run_dag(dag)


def test_the_image_the_dag_run_built_is_trusted(ecs_world, task_progress, monkeypatch, tmp_path):
    """An image outside the configured repository runs when it is exactly what this run's build returned."""
    task_progress({"progression": "immediate"})
    run = run_build_then_job(ecs_world, monkeypatch, "built_image_job", BUILT, poll_interval=1)
    assert states(run) == {"build_image": "success", "job": "success"}
    (arn,) = ecs_calls(ecs_world)[0]
    (task,) = ecs_world.ecs.describe_tasks(cluster=CLUSTER, tasks=[arn])["tasks"]
    definition = ecs_world.ecs.describe_task_definition(taskDefinition=task["taskDefinitionArn"])["taskDefinition"]
    assert definition["containerDefinitions"][0]["image"] == BUILT


def test_an_edited_build_xcom_is_refused_before_any_run_task(ecs_world, monkeypatch, tmp_path):
    """The build task's XCom rewritten to another image (the USER role may edit XComs): the job re-derives what the
    run built (the registry's digest under the sources' content-hash tag), refuses the XCom, and calls no ECS API."""
    run = run_build_then_job(ecs_world, monkeypatch, "edited_build_xcom", "docker.io/attacker/x:latest")
    assert states(run) == {"build_image": "success", "job": "failed"}
    assert ecs_calls(ecs_world) == ([], [])


@pytest.mark.parametrize("image", [PUBLIC, f"{BATCH_REPOSITORY}:latest"])
def test_batch_refuses_an_untrusted_image_with_no_submit_job(batch_env, image):
    from airflow.sdk.exceptions import AirflowFailException

    ti = TaskInstanceStandIn()
    with pytest.raises(AirflowFailException, match="trusted images only"):
        operator(image=image).execute(context(ti))
    assert jobs_named(batch_env, ti) == [] and ti.xcoms == {}
    assert batch_env.batch.describe_job_definitions(status="ACTIVE")["jobDefinitions"] == []
    assert image != BATCH_IMAGE
