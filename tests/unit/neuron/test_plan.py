"""The one container plan: every backend renders the same argv and environment, and MFU has one source."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_trainium.compute.batch import definitions as batch
from airflow_provider_trainium.compute.ecs import definitions as ecs
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.neuron.catalog import CATALOG
from airflow_provider_trainium.neuron.plan import PEAK_FLOPS_ENV, container_plan, peak_flops_per_core
from airflow_provider_trainium.neuron.releases import auto_stack, stack_problem
from airflow_provider_trainium.neuron.spec import JobSpec, JobSpecError

#: Catalog types some stack of the release table trains on (trn2u.48xlarge has none yet: test_catalog.py).
TRAINABLE = sorted(t for t in CATALOG if stack_problem(auto_stack(t), t) is None)
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "b" * 64
ECS_SETTINGS = ecs.EcsTaskSettings(image=IMAGE, log_group="/trainium/jobs", region_name="us-east-1")


def spec(**changes: object) -> JobSpec:
    values: dict[str, object] = {
        "name": "train",
        "entry_point": "trainium_trainer.mnist_mlp.train",
        "args": ("--epochs", "1"),
        "instance_type": "trn1.32xlarge",
        "image": IMAGE,
        "output_uri": "s3://b/runs/1",
        "env": {"TRAINIUM_SEED": "3"},
    }
    values.update(changes)
    return JobSpec(**values).validate()  # type: ignore[arg-type]


def _env(pairs: list[dict[str, str]]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in pairs}


@pytest.mark.parametrize("instance_type", TRAINABLE)
def test_the_mfu_peak_is_one_neuroncores_share_of_the_instance_on_trainium_only(instance_type: str) -> None:
    s = spec(instance_type=instance_type, stack=auto_stack(instance_type))
    instance = CATALOG[instance_type]
    on_trainium = container_plan(s)
    assert on_trainium.peak_flops == pytest.approx(instance.peak_bf16_tflops * 1e12 / instance.neuron_cores)
    assert float(on_trainium.environment[PEAK_FLOPS_ENV]) == pytest.approx(peak_flops_per_core(instance), rel=1e-5)
    local = container_plan(s, on_trainium=False)
    assert local.peak_flops is None and PEAK_FLOPS_ENV not in local.environment


def test_a_job_env_cannot_set_the_peak_and_the_plan_ignores_one_that_slipped_in() -> None:
    with pytest.raises(JobSpecError, match=PEAK_FLOPS_ENV):
        spec(env={PEAK_FLOPS_ENV: "1"})
    unchecked = dataclasses.replace(spec(), env={PEAK_FLOPS_ENV: "1"})
    assert container_plan(unchecked).environment[PEAK_FLOPS_ENV] != "1"
    assert PEAK_FLOPS_ENV not in container_plan(unchecked, on_trainium=False).environment


def test_a_runs_own_value_for_a_preset_goes_in_the_overrides_and_wins() -> None:
    plan = container_plan(spec(env={"MALLOC_ARENA_MAX": "8"}))
    assert plan.preset_environment["MALLOC_ARENA_MAX"] == "64"
    assert plan.run_environment["MALLOC_ARENA_MAX"] == "8" == plan.environment["MALLOC_ARENA_MAX"]


def test_per_run_values_stay_out_of_the_presets_so_definitions_are_reused() -> None:
    one, other = container_plan(spec()), container_plan(spec(output_uri="s3://b/runs/2", env={"TRAINIUM_SEED": "4"}))
    assert one.preset_environment == other.preset_environment
    assert ecs.task_definition(one, ECS_SETTINGS) == ecs.task_definition(other, ECS_SETTINGS)
    settings = batch.BatchSettings(region_name="us-east-1")
    assert batch.build_job_definition(one, settings) == batch.build_job_definition(other, settings)
    assert one.run_environment["TRAINIUM_OUTPUT_URI"] != other.run_environment["TRAINIUM_OUTPUT_URI"]


@pytest.mark.parametrize("nodes", [1, 2])
def test_ecs_batch_and_local_render_one_plan(nodes: int, tmp_path) -> None:
    s = spec(nodes=nodes)
    plan = container_plan(s)
    request = batch.submit_request(plan, job_name="j", job_queue="q", job_definition="d", tags={})
    overrides = (
        request["nodeOverrides"]["nodePropertyOverrides"][0]["containerOverrides"]
        if nodes > 1
        else (request["containerOverrides"])
    )
    assert overrides["command"] == list(plan.command)
    if nodes == 1:
        (container,) = ecs.container_overrides(plan)["containerOverrides"]
        assert container["command"] == list(plan.command)
        assert _env(container["environment"]) == dict(plan.run_environment)
    # local compute runs the plan's argv (its own interpreter for the image's `python`) with the plan's env,
    # less the MFU peak of hardware it does not run on
    local = LocalBackend(tmp_path, python="/usr/bin/python3")
    local_plan = container_plan(s, on_trainium=False)
    assert local.node_argv(local_plan) == ["/usr/bin/python3", *plan.argv[1:]]
    env = local.node_environment(local_plan, "j", 0, 41000, tmp_path)
    assert {k: env[k] for k in plan.environment if k != PEAK_FLOPS_ENV} == {
        k: v for k, v in plan.environment.items() if k != PEAK_FLOPS_ENV
    }
    assert PEAK_FLOPS_ENV not in env


def test_the_plan_is_a_pure_function_of_the_spec() -> None:
    s = spec()
    assert container_plan(s) == container_plan(dataclasses.replace(s))
