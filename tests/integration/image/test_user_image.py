"""A user's image FROM the real training image, built by TrainiumImageBuildOperator, runs the user's script.

The training image is docker/Dockerfile built over the stand-in base as test_real_image.py builds it
(``stand_in_build``: the cached Debian root file system, no Neuron or PyPI layers). The user's context is a
Dockerfile ``FROM ${TRAINIUM_BASE_IMAGE}`` plus ``COPY train.py /opt/user/``; the operator names the base as the
connection's configured image (``base_image="trainium"``, a tag it pins by digest), builds it with buildah into the
local registry, and the image is then started as ECS starts it for ``command=["python", "/opt/user/train.py"]``.
The launcher really runs the script (single process: the stand-in base has no torch for torchrun), so the test sees
the environment the contract gives a user's job; a second, dry run shows the torchrun command of the distributed job.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.compute.ecs import definitions as ecs_definitions
from airflow_provider_trainium.image.builders.base import BASE_DIGEST_LABEL
from airflow_provider_trainium.image.builders.buildah import BuildahBuilder
from airflow_provider_trainium.image.user_image import BASE_ARG
from airflow_provider_trainium.neuron.container_contract import IMAGE_ENTRYPOINT, docker_argv
from airflow_provider_trainium.neuron.plan import container_plan
from airflow_provider_trainium.neuron.releases import RUNTIME_LABEL, image_stack
from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator
from airflow_provider_trainium.operators.run_images import built_image_labels
from tests.conftest import set_trainium_connection
from tests.integration.image.conftest import Image, LocalRegistry, names_values, stand_in_build, write_tree

pytestmark = pytest.mark.slow

USER_DOCKERFILE = f"""\
ARG {BASE_ARG}
FROM ${{{BASE_ARG}}}
COPY train.py /opt/user/train.py
"""
TRAIN_PY = """\
import json, os, sys
names = ("TRAINIUM_OUTPUT_DIR", "TRAINIUM_CHECKPOINT_DIR", "TRAINIUM_CODE_DIR", "TRAINIUM_STACK",
         "TRAINIUM_INSTANCE_TYPE", "PYTHONPATH", "RANK", "WORLD_SIZE")
print(json.dumps({"argv": sys.argv, "python": sys.executable, "cwd": os.getcwd(),
                  "env": {n: os.environ.get(n) for n in names}}))
"""


@dataclass
class TaskInstanceStandIn:
    """Keeps what the build task pushes and hands it back as a later task's ``xcom_pull`` would."""

    task_id: str = "user_image"
    dag_id: str = "user_image_dag"
    run_id: str = "manual__1"
    xcoms: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value

    def xcom_pull(self, task_ids: str, key: str = "return_value") -> Any:
        return self.xcoms.get(key) if task_ids == self.task_id else None


@dataclass(frozen=True)
class UserImage:
    training: Image
    operator: TrainiumImageBuildOperator
    ti: TaskInstanceStandIn
    reference: str
    config: dict[str, Any]

    @property
    def tagged(self) -> str:
        """The name buildah's storage holds it under (the pushed digest may differ from the local manifest's)."""
        return f"{self.operator.repository}:{self.ti.xcoms['tag']}"


@pytest.fixture(scope="module")
def user_image(tmp_path_factory: pytest.TempPathFactory, local_registry: LocalRegistry) -> Iterator[UserImage]:
    """The training image, then the user's image built FROM it by the operator, in the same buildah storage."""
    with stand_in_build(tmp_path_factory, local_registry, "docker/Dockerfile", "trainium/trainer") as training:
        context = write_tree(tmp_path_factory.mktemp("user-context"), {"Dockerfile": USER_DOCKERFILE,
                                                                        "train.py": TRAIN_PY})  # fmt: skip
        root = training.buildah.base[training.buildah.base.index("--root") + 1]
        runroot = training.buildah.base[training.buildah.base.index("--runroot") + 1]
        operator = TrainiumImageBuildOperator(
            task_id="user_image",
            context_dir=str(context),
            base_image="trainium",
            repository=local_registry.repository("trainium/user"),
            insecure_registry=True,
            builder=BuildahBuilder(root=root, runroot=runroot, layers=False),
        )
        ti = TaskInstanceStandIn()
        with pytest.MonkeyPatch.context() as monkeypatch:
            # the connection's image by tag, as a deployment names it: the operator pins it by digest
            set_trainium_connection(monkeypatch, image=training.result.tagged)
            reference = operator.execute({"ti": ti})  # type: ignore[arg-type]
        ti.xcoms["return_value"] = reference  # what Airflow does with the task's return value
        tagged = f"{operator.repository}:{ti.xcoms['tag']}"
        inspected = json.loads(training.buildah("inspect", "--type", "image", tagged).stdout)
        yield UserImage(training, operator, ti, reference, inspected["Docker"]["config"])


def test_the_base_is_the_training_image_pinned_by_digest(user_image: UserImage) -> None:
    training, xcoms = user_image.training.result, user_image.ti.xcoms
    assert xcoms["built"] is True and user_image.reference.endswith(f"/trainium/user@{xcoms['digest']}")
    assert xcoms["base_digest"] == training.digest
    assert xcoms["labels"][BASE_DIGEST_LABEL] == training.digest
    # the tag covers the base digest: the context's hash took the pinned reference as a build arg
    assert xcoms["tag"] != training.tag and xcoms["tag"].startswith("ctx-")


def test_a_second_build_from_the_builds_reference_finds_the_image(user_image: UserImage) -> None:
    """The training image's build task output (``repository@sha256:...``) pins the same base: same tag, no build."""
    again = TrainiumImageBuildOperator(
        task_id="user_image",
        context_dir=user_image.operator.context_dir,
        base_image=user_image.training.result.reference,
        repository=user_image.operator.repository,
        insecure_registry=True,
        builder=user_image.operator.builder,
    )
    ti = TaskInstanceStandIn()
    with pytest.MonkeyPatch.context() as monkeypatch:
        set_trainium_connection(monkeypatch)
        assert again.execute({"ti": ti}) == user_image.reference  # type: ignore[arg-type]
    assert ti.xcoms["built"] is False and ti.xcoms["tag"] == user_image.ti.xcoms["tag"]


def test_labels_come_through_from_so_the_stack_is_detected(user_image: UserImage) -> None:
    labels = user_image.ti.xcoms["labels"]
    training_labels = user_image.training.registry.labels(user_image.training.result.tag) or {}
    assert labels[RUNTIME_LABEL] == training_labels[RUNTIME_LABEL]
    assert image_stack(user_image.reference, labels) == "xla" == user_image.ti.xcoms["stack"]

    class Dag:  # what a job task of the same run asks: the labels of the image this run built
        tasks = [user_image.operator]

        def get_task(self, task_id: str) -> Any:
            return next(task for task in self.tasks if task.task_id == task_id)

    with pytest.MonkeyPatch.context() as monkeypatch:  # re-deriving the image reads the connection's registry
        set_trainium_connection(monkeypatch, image=user_image.training.result.tagged)
        assert built_image_labels({"ti": user_image.ti}, Dag(), user_image.reference) == labels


def test_the_user_image_keeps_the_container_contract(user_image: UserImage) -> None:
    assert user_image.config["Entrypoint"] == list(IMAGE_ENTRYPOINT) and not user_image.config.get("Cmd")


def run_in_user_image(user_image: UserImage, spec: JobSpec, dry_run: bool = False) -> str:
    """Start the user's image as ECS would for ``spec`` (Entrypoint + command, image Env + task env)."""
    plan = container_plan(spec)
    settings = ecs_definitions.EcsTaskSettings(image=user_image.reference, log_group="/g", region_name="us-east-1")
    (container,) = ecs_definitions.task_definition(plan, settings)["containerDefinitions"]
    (override,) = ecs_definitions.container_overrides(plan)["containerOverrides"]
    env = {**names_values(container["environment"]), **names_values(override["environment"])}
    if dry_run:
        env["TRAINIUM_LAUNCH_DRY_RUN"] = "1"
    argv = docker_argv(user_image.config["Entrypoint"], user_image.config.get("Cmd") or [], override["command"])
    buildah = user_image.training.buildah
    box = buildah("from", user_image.tagged).stdout.strip()
    try:
        flags = [f"--env={k}={v}" for k, v in env.items()]
        done = buildah("run", "--isolation", "chroot", *flags, box, "--", *argv, check=False)
    finally:
        buildah("rm", box, check=False)
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def user_spec(distributed: bool) -> JobSpec:
    return JobSpec(name="t", command=("python", "/opt/user/train.py"), args=("--epochs", "1"),
                   instance_type="trn1.32xlarge", distributed=distributed, image="u@sha256:" + "0" * 64)  # fmt: skip


def test_the_launcher_runs_the_users_script_with_the_contracts_environment(user_image: UserImage) -> None:
    stdout = run_in_user_image(user_image, user_spec(distributed=False))
    (line,) = [line for line in stdout.splitlines() if line.startswith("{")]
    ran = json.loads(line)
    env = ran["env"]
    assert ran["argv"] == ["/opt/user/train.py", "--epochs", "1"] and ran["python"].startswith("/usr/bin/python")
    assert ran["cwd"] == env["TRAINIUM_OUTPUT_DIR"] == "/tmp/trainium-job/output"
    assert (env["TRAINIUM_CHECKPOINT_DIR"], env["TRAINIUM_CODE_DIR"]) == (
        "/tmp/trainium-job/checkpoints",
        "/tmp/trainium-job/code",
    )
    assert env["PYTHONPATH"].split(":") == ["/tmp/trainium-job/code", "/opt/trainium"]  # the launcher stays importable
    assert (env["TRAINIUM_STACK"], env["TRAINIUM_INSTANCE_TYPE"]) == ("xla", "trn1.32xlarge")


def test_the_distributed_job_runs_the_script_under_torchrun(user_image: UserImage) -> None:
    stdout = run_in_user_image(user_image, user_spec(distributed=True), dry_run=True)
    torchrun = json.loads(stdout.strip().splitlines()[-1])
    assert torchrun[1:3] == ["-m", "trainium_trainer.loopback_torchrun"] and "--nproc_per_node=32" in torchrun
    assert torchrun[torchrun.index("--no-python") + 1 :][1:] == ["/opt/user/train.py", "--epochs", "1"]


def summarize(values: list[int], scale: float = 1.0) -> dict:
    import os

    return {"rank": int(os.environ["RANK"]), "world": int(os.environ["WORLD_SIZE"]), "total": sum(values) * scale}


def test_a_trainium_task_function_runs_in_the_image(user_image: UserImage, tmp_path) -> None:
    """``@task.trainium``'s container: the launcher runs the function runner under torchrun (dry run: the
    stand-in has no torch), and the runner, started as torchrun starts each rank, calls the function from the
    job's code bundle and writes rank 0's return value where the launcher uploads it."""
    from airflow_provider_trainium.decorators.trainium import _TrainiumDecoratedOperator
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig
    from trainium_trainer import boundary

    operator = _TrainiumDecoratedOperator(python_callable=summarize, task_id="summarize", op_args=[[1, 2, 3]],
                                          op_kwargs={"scale": 2.0})  # fmt: skip
    bundle = operator.code_uri({}, TrainiumConfig(artifact_root=(tmp_path / "artifacts").as_uri()))  # type: ignore[arg-type]
    spec = JobSpec(name="f", command=tuple(operator.command), instance_type="trn1.32xlarge",
                   image="u@sha256:" + "0" * 64, code_uri=bundle)  # fmt: skip
    torchrun = json.loads(run_in_user_image(user_image, spec, dry_run=True).strip().splitlines()[-1])
    per_rank = torchrun[torchrun.index("--no-python") + 1 :]
    assert per_rank[1:] == ["-m", "trainium_trainer.function"]

    buildah = user_image.training.buildah
    box = buildah("from", user_image.tagged).stdout.strip()
    try:
        buildah("copy", box, bundle.removeprefix("file://"), "/tmp/trainium-job/code")
        env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", boundary.ENV_CODE_DIR: "/tmp/trainium-job/code",
               boundary.ENV_OUTPUT_DIR: "/tmp/trainium-job/output"}  # fmt: skip
        flags = [f"--env={k}={v}" for k, v in env.items()]
        done = buildah("run", "--isolation", "chroot", *flags, box, "--", "python", *per_rank[1:], check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        # read from the container's root folder, not through a second `buildah run` and its output pipe
        root = Path(buildah("mount", box).stdout.strip())
        result = (root / "tmp" / "trainium-job" / "output" / boundary.FUNCTION_RESULT_FILE).read_text()
    finally:
        buildah("rm", box, check=False)
    ran = f"the runner's stdout:\n{done.stdout[-2000:]}\nstderr:\n{done.stderr[-2000:]}"
    assert json.loads(result) == {"result": {"rank": 0, "world": 2, "total": 12.0}}, ran
