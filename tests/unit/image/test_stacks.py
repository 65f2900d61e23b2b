"""A build task builds the image of the run's stack: the native Dockerfile for a native run, the XLA one otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_trainium.image.dockerfile import logical_lines
from airflow_provider_trainium.image.stacks import DOCKERFILES, dockerfile_for, image_stack_for_build
from airflow_provider_trainium.neuron.releases import RUNTIME_LABEL, image_stack
from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("stack", sorted(DOCKERFILES))
def test_each_stacks_dockerfile_labels_an_image_of_that_stack(stack: str) -> None:
    """The Dockerfile a stack builds sets the runtime label the provider later reads the stack from."""
    lines = logical_lines((REPO / dockerfile_for(stack)).read_text())
    args = {rest.split("=", 1)[0]: rest.split("=", 1)[1] for ins, rest in lines if ins == "ARG" and "=" in rest}
    reference = "registry.example/trainium@sha256:" + "0" * 64
    assert image_stack(reference, {RUNTIME_LABEL: args["NEURON_RUNTIME_VERSION"]}) == stack


@pytest.mark.parametrize(
    ("stack", "instance_type", "expected"),
    [
        (None, None, "xla"),
        ("", "trn2.48xlarge", "xla"),
        ("auto", "trn2.48xlarge", "native"),
        ("auto", "trn3.48xlarge", "native"),
        ("auto", "trn1.32xlarge", "xla"),
        ("native", "trn2.48xlarge", "native"),
        ("native", None, "native"),
        ("xla", "trn2.48xlarge", "xla"),
    ],
)
def test_the_build_stack_is_the_runs_stack(stack: str | None, instance_type: str | None, expected: str) -> None:
    assert image_stack_for_build(stack, instance_type) == expected


@pytest.mark.parametrize(
    ("stack", "instance_type", "message"),
    [
        ("native", "trn1.32xlarge", "stack 'native' does not train on trn1"),
        ("auto", None, "needs the run's instance_type"),
        ("tpu", None, "no training image for stack 'tpu'"),
    ],
)
def test_a_stack_without_an_image_for_the_run_is_refused(stack: str, instance_type: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        image_stack_for_build(stack, instance_type)


def test_a_native_build_task_builds_docker_native() -> None:
    task = TrainiumImageBuildOperator(task_id="build_image", stack="native", instance_type="trn2.48xlarge")
    stack = task.image_stack()
    assert (stack, task.dockerfile_path(stack)) == ("native", "docker/native/Dockerfile")
    assert {"stack", "instance_type", "dockerfile"} <= set(task.template_fields)


def test_without_a_stack_the_build_task_builds_the_xla_image_and_a_given_dockerfile_wins() -> None:
    plain = TrainiumImageBuildOperator(task_id="build_image")
    assert plain.dockerfile_path(plain.image_stack()) == "docker/Dockerfile"
    custom = TrainiumImageBuildOperator(task_id="build_image", stack="native", dockerfile="images/Mine.dockerfile")
    assert custom.dockerfile_path(custom.image_stack()) == "images/Mine.dockerfile"


@pytest.mark.parametrize(
    ("conf", "dockerfile"),
    [
        ({"instance_type": "trn2.48xlarge", "stack": "auto"}, "docker/native/Dockerfile"),
        ({"instance_type": "trn2.48xlarge", "stack": "xla"}, "docker/Dockerfile"),
        ({"instance_type": "trn1.32xlarge", "stack": "auto"}, "docker/Dockerfile"),
    ],
)
def test_the_pretrain_dags_build_task_builds_the_image_of_the_runs_stack(conf: dict[str, str], dockerfile: str) -> None:
    """The DAG passes its stack and instance type to the build task, whose rendered templates choose the file."""
    import importlib.util

    from jinja2 import Environment

    path = REPO / "dags" / "trainium_llama_pretrain.py"
    loader = importlib.util.spec_from_file_location("pretrain_dag_under_test", path)
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    task = module.dag.get_task("build_image")
    params = {**{name: module.dag.params[name] for name in module.dag.params}, **conf}
    for name in ("stack", "instance_type"):
        setattr(task, name, Environment().from_string(getattr(task, name)).render(params=params))
    assert task.dockerfile_path(task.image_stack()) == dockerfile
