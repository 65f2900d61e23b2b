"""A job's secrets travel by reference only, against the moto server.

* ECS and Batch: the registered task definition and job definition carry ``secrets`` (``valueFrom``), and no
  environment entry of the definition or of the run's overrides holds the value.
* Local compute, through a real ``dag.test()``: the job's process sees the value (it writes its hash to its
  output), and the value is in no task log line, no XCom, no rendered template field and no local state file.
* A reference that cannot be read fails the task before any process starts, naming the reference.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.compute.ecs.backend import EcsBackend
from airflow_provider_trainium.compute.naming import job_name, job_tags
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.conftest import MOTO_REGION, set_trainium_connection
from tests.integration.ecs.conftest import IMAGE as ECS_IMAGE

#: What the secrets hold: long and unlike anything else in a log, so a find is a leak.
TOKEN = "hf_" + hashlib.sha256(b"trainium secrets test").hexdigest()[:30]
OTHER = "wandb-" + hashlib.sha256(b"the other secret").hexdigest()[:24]
PARAMETER = "/trainium/test/hf-token"
#: The job: the hash of the token into its output folder, and the token itself onto its stdout.
PROGRAM = (
    "import hashlib, os, pathlib\n"
    "token = os.environ['HF_TOKEN']\n"
    "out = pathlib.Path(os.environ['TRAINIUM_OUTPUT_DIR'])\n"
    "out.mkdir(parents=True, exist_ok=True)\n"
    "(out / 'h.txt').write_text(hashlib.sha256(token.encode()).hexdigest())\n"
    "print('the token is', token, flush=True)\n"
)


def client(aws_conn_id: str, service: str) -> Any:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    return AwsBaseHook(aws_conn_id=aws_conn_id, client_type=service, region_name=MOTO_REGION).conn


def make_secrets(aws_conn_id: str) -> dict[str, str]:
    """An SSM SecureString and a Secrets Manager secret on the moto server: name -> reference."""
    client(aws_conn_id, "ssm").put_parameter(Name=PARAMETER, Value=TOKEN, Type="SecureString")
    arn = client(aws_conn_id, "secretsmanager").create_secret(Name="trainium/wandb", SecretString=OTHER)["ARN"]
    return {"HF_TOKEN": f"ssm:{PARAMETER}", "WANDB_API_KEY": arn}


def holds_no_value(document: Any) -> None:
    text = json.dumps(document, default=str)
    assert TOKEN not in text and OTHER not in text


# -- ECS and Batch: the definitions carry references --------------------------------------------------------


def test_the_ecs_task_definition_carries_value_from_and_no_value(ecs_world, task_progress):
    task_progress({"progression": "manual", "times": 10_000})
    ecs_world.add_instance("trn1.2xlarge")
    secrets = make_secrets(ecs_world.aws_conn_id)
    backend = EcsBackend(ecs_world.config(), poll_interval_seconds=0)
    spec = JobSpec(name="train", command=("python", "train.py"), image=ECS_IMAGE, secrets=secrets,
                   output_uri="s3://trainium-test-artifacts/trainium/runs/x")  # fmt: skip
    name, tags = job_name("secrets", "train", "r1"), job_tags("secrets", "train", "r1")

    handle = backend.submit(spec, name, tags)

    task = ecs_world.ecs.describe_tasks(cluster=ecs_world.cluster, tasks=[handle.job_id])["tasks"][0]
    definition = ecs_world.ecs.describe_task_definition(taskDefinition=task["taskDefinitionArn"])["taskDefinition"]
    (container,) = definition["containerDefinitions"]
    assert container["secrets"] == [
        {"name": "HF_TOKEN", "valueFrom": PARAMETER},
        {"name": "WANDB_API_KEY", "valueFrom": secrets["WANDB_API_KEY"]},
    ]
    assert not {"HF_TOKEN", "WANDB_API_KEY"} & {e["name"] for e in container["environment"]}
    holds_no_value(definition)
    holds_no_value(task["overrides"])
    backend.cancel(handle, "the test only needed its definition")


@pytest.mark.parametrize(("instance_type", "nodes"), [("trn1.2xlarge", 1), ("trn1.32xlarge", 2)])
def test_the_batch_job_definition_carries_value_from_and_no_value(batch_env, instance_type, nodes):
    from tests.integration.batch.conftest import IMAGE as BATCH_IMAGE

    secrets = make_secrets(batch_env.config.aws_conn_id)
    spec = JobSpec(name="train", command=("python", "train.py"), image=BATCH_IMAGE, secrets=secrets,
                   instance_type=instance_type, nodes=nodes, output_uri="s3://trainium-test-artifacts/trainium/runs/x",
                   timeout_seconds=3600)  # fmt: skip
    backend = batch_env.backend()

    handle = backend.submit(spec, f"secrets-{nodes}", {"airflow:dag_id": "secrets"})

    name = handle.details["job_definition"].split("/")[-1].split(":")[0]
    (definition,) = batch_env.batch.describe_job_definitions(jobDefinitionName=name)["jobDefinitions"]
    (job,) = batch_env.batch.describe_jobs(jobs=[handle.job_id])["jobs"]
    if nodes == 1:
        containers = [definition["containerProperties"]]
    else:  # moto's DescribeJobDefinitions leaves nodeProperties out; DescribeJobs has the definition's
        assert definition["type"] == "multinode"
        containers = [r["container"] for r in job["nodeProperties"]["nodeRangeProperties"]]
    expected = [
        {"name": "HF_TOKEN", "valueFrom": PARAMETER},
        {"name": "WANDB_API_KEY", "valueFrom": secrets["WANDB_API_KEY"]},
    ]
    assert containers and all(c["secrets"] == expected for c in containers)
    assert all(not {"HF_TOKEN", "WANDB_API_KEY"} & {e["name"] for e in c["environment"]} for c in containers)
    holds_no_value(definition)
    holds_no_value(job)
    backend.cancel(handle, "the test only needed its definition")


# -- local compute through dag.test() ---------------------------------------------------------------------------


def run_local_dag(dag_id: str, secrets: dict[str, str], program: str = PROGRAM):
    from airflow.sdk import DAG

    from airflow_provider_trainium.operators.job import TrainiumJobOperator
    from tests.integration.registry.conftest import run_dag

    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        TrainiumJobOperator(task_id="job", command=[sys.executable, "-c", program], secrets=secrets, compute="local",
                            distributed=False, retries=0)  # fmt: skip
    return run_dag(dag)


def xcoms(run) -> list[Any]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(XComModel).filter_by(dag_id=run.dag_id, run_id=run.run_id).all()
        return [(row.key, XComModel.deserialize_value(row)) for row in rows]


def rendered_fields(run) -> list[Any]:
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(RenderedTaskInstanceFields).filter_by(dag_id=run.dag_id, run_id=run.run_id).all()
        return [(row.task_id, row.rendered_fields) for row in rows]


def as_task_log(text: str) -> list[str]:
    """Captured lines as a worker's task log holds them: each through the Task SDK's masker.

    ``dag.test()`` runs the task in this process, whose console logging Airflow core configured without a
    masker; on a worker every task log line passes the Task SDK's ``mask_logs`` (its ``redact``) before it is
    written (``airflow.sdk.log``), so that is what stands between a printed value and the log.
    """
    from airflow.sdk.log import redact

    return [str(redact(line)) for line in text.splitlines()]


@pytest.fixture
def local_world(aws_conn_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A trainium connection for local compute whose AWS connection is the moto server; returns the root."""
    root = tmp_path / "root"
    root.mkdir()
    set_trainium_connection(monkeypatch, artifact_root=root.as_uri(), aws_conn_id=aws_conn_id, region_name=MOTO_REGION)
    return root


def test_a_local_job_gets_the_value_and_nothing_else_does(local_world, aws_conn_id, capfd, caplog):
    from airflow_provider_trainium.compute.local.backend import local_state_dir

    secrets = make_secrets(aws_conn_id)
    caplog.set_level(logging.INFO)  # the task's INFO lines are the ones that carry the job's output

    run = run_local_dag("job_secrets_local", secrets)

    out, err = capfd.readouterr()
    assert str(run.state) == "success", (out + err)[-4000:]
    values = dict(xcoms(run))
    output_uri = values["return_value"]
    assert output_uri.startswith("file://")
    written = Path(output_uri.removeprefix("file://")) / "h.txt"
    assert written.read_text() == hashlib.sha256(TOKEN.encode()).hexdigest()  # the process saw the value

    # the job's own lines reach the log only when the wait reads them before the job ends (a job this short may
    # end first); the next test proves a printed value is masked there
    logged = as_task_log("\n".join([out, err, *(r.getMessage() for r in caplog.records)]))
    assert [line for line in logged if TOKEN in line or OTHER in line] == []
    holds_no_value(values)
    rendered = rendered_fields(run)
    assert [task for task, _ in rendered] == ["job"]  # the task's rendered fields were recorded
    holds_no_value(rendered)
    job = values["job"]
    state = local_state_dir() / f"{job['job_name']}.json"
    assert state.exists()
    assert TOKEN not in state.read_text() and OTHER not in state.read_text()


def test_a_value_the_job_prints_is_masked_in_the_task_log(local_world, aws_conn_id, capfd, caplog):
    """A failing job's last lines always reach the task log (in the failure's message), printed values included.

    ``SsmHook`` masks a SecureString itself; the Secrets Manager value is masked only because it was resolved
    for the job, so that line is the one that proves it."""
    secrets = make_secrets(aws_conn_id)
    caplog.set_level(logging.INFO)
    program = (
        "import os, sys\n"
        "print('the token is', os.environ['HF_TOKEN'], flush=True)\n"
        "print('the key is', os.environ['WANDB_API_KEY'], flush=True)\n"
        "sys.exit(3)\n"
    )

    run = run_local_dag("job_secrets_printed", secrets, program)

    out, err = capfd.readouterr()
    assert str(run.state) == "failed"
    logged = as_task_log("\n".join([out, err, *(r.getMessage() for r in caplog.records)]))
    for said in ("the token is", "the key is"):
        printed = [line for line in logged if said in line and "print(" not in line]  # not the echoed command
        assert printed, f"{said!r} never reached the task log:\n" + "\n".join(logged)[-8000:]
        assert all(f"{said} ***" in line for line in printed)  # masked, not dropped
    assert [line for line in logged if TOKEN in line or OTHER in line] == []


def test_a_reference_that_cannot_be_read_fails_before_anything_starts(local_world, aws_conn_id, capfd, caplog):
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    missing = "ssm:/trainium/test/never-created"
    caplog.set_level(logging.INFO)

    run = run_local_dag("job_secrets_missing", {"HF_TOKEN": missing})

    out, err = capfd.readouterr()
    assert str(run.state) == "failed"
    with create_session() as session:
        ti = session.query(TaskInstance).filter_by(dag_id=run.dag_id, run_id=run.run_id, task_id="job").one()
        assert str(ti.state) == "failed" and ti.try_number == 1
    logged = out + err + "\n".join(r.getMessage() for r in caplog.records)
    assert f"secret HF_TOKEN ({missing}) could not be read: ParameterNotFound" in logged
    assert "job" not in dict(xcoms(run))  # no job was started
    assert not any(local_world.rglob("h.txt"))
