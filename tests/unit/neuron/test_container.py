"""One container shape: what ECS and Batch render for the same job is the same container."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.compute.batch import definitions as batch
from airflow_provider_trainium.compute.ecs import definitions as ecs
from airflow_provider_trainium.neuron.catalog import CATALOG
from airflow_provider_trainium.neuron.container import container_shape
from airflow_provider_trainium.neuron.launch import job_environment
from airflow_provider_trainium.neuron.plan import container_plan
from airflow_provider_trainium.neuron.releases import auto_stack, stack_problem
from airflow_provider_trainium.neuron.spec import JobSpec

#: Catalog types some stack of the release table trains on (trn2u.48xlarge has none yet: test_catalog.py).
TRAINABLE = sorted(t for t in CATALOG if stack_problem(auto_stack(t), t) is None)
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "a" * 64
ECS_SETTINGS = ecs.EcsTaskSettings(image=IMAGE, log_group="/trainium/jobs", region_name="us-east-1")
BATCH_SETTINGS = batch.BatchSettings(region_name="us-east-1", log_group="/trainium/jobs")


def spec(instance_type: str, nodes: int = 1, **changes: object) -> JobSpec:
    values: dict[str, object] = {
        "name": "train",
        "entry_point": "trainium_trainer.mnist_mlp",
        "instance_type": instance_type,
        "nodes": nodes,
        "image": IMAGE,
        "output_uri": "s3://b/runs/1",
        "env": {"TRAINIUM_SEED": "3"},
        "stack": auto_stack(instance_type),
    }
    values.update(changes)
    return JobSpec(**values).validate()  # type: ignore[arg-type]


def _paths(devices: list[dict]) -> list[tuple[str, frozenset[str]]]:
    return [(d["hostPath"], frozenset(p.upper() for p in d["permissions"])) for d in devices]


def _env(pairs: list[dict[str, str]]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in pairs}


@pytest.mark.parametrize("instance_type", TRAINABLE)
def test_ecs_and_batch_render_the_same_single_node_container(instance_type: str) -> None:
    s = spec(instance_type)
    plan = container_plan(s)
    task = ecs.task_definition(plan, ECS_SETTINGS)
    c_ecs = task["containerDefinitions"][0]
    c_batch = batch.build_job_definition(plan, BATCH_SETTINGS)["containerProperties"]
    requirements = {r["type"]: int(r["value"]) for r in c_batch["resourceRequirements"]}

    assert c_ecs["cpu"] == int(task["cpu"]) == requirements["VCPU"] * 1024
    assert c_ecs["memory"] == int(task["memory"]) == requirements["MEMORY"]
    assert c_ecs["linuxParameters"]["sharedMemorySize"] == c_batch["linuxParameters"]["sharedMemorySize"]
    assert _paths(c_ecs["linuxParameters"]["devices"]) == _paths(c_batch["linuxParameters"]["devices"])
    assert c_ecs["ulimits"] == c_batch["ulimits"]
    # Both write the plan's halves in the same places: presets in the definition, the run's own in the overrides.
    assert _env(c_ecs["environment"]) == _env(c_batch["environment"]) == plan.preset_environment
    ecs_run = _env(ecs.container_overrides(plan)["containerOverrides"][0]["environment"])
    assert ecs_run == _env(batch.container_overrides(plan)["environment"]) == plan.run_environment
    # What the container finally sees (definition, then overrides) is the job's environment plus the MFU peak.
    assert {**_env(c_ecs["environment"]), **ecs_run} == {
        **job_environment(s),
        "TRAINIUM_PEAK_FLOPS": f"{plan.peak_flops:.6g}",
    }


@pytest.mark.parametrize(
    ("instance_type", "vcpus", "memory_gib", "shm_gib"),
    [
        ("trn1.2xlarge", 7, 30, 4),
        ("trn1.32xlarge", 127, 486, 64),
        ("trn1n.32xlarge", 127, 486, 64),
        ("trn2.3xlarge", 11, 121, 16),
        ("trn2.48xlarge", 191, 1945, 256),
        ("trn2u.48xlarge", 191, 1945, 256),
        ("trn3.48xlarge", 191, 1945, 256),
    ],
)
def test_shape_keeps_one_vcpu_and_a_memory_headroom_and_gives_an_eighth_to_shm(
    instance_type: str, vcpus: int, memory_gib: int, shm_gib: int
) -> None:
    shape = container_shape(instance_type)
    assert (shape.vcpus, shape.memory_mib, shape.shared_memory_mib) == (vcpus, memory_gib * 1024, shm_gib * 1024)
    assert shape.memory_mib + 2048 <= CATALOG[instance_type].memory_gib * 1024  # never asks for all of it
    assert {u.name: (u.soft, u.hard) for u in shape.ulimits}["memlock"] == (-1, -1)
    assert shape.capabilities == ("IPC_LOCK",)


@pytest.mark.parametrize("instance_type", [n for n in TRAINABLE if CATALOG[n].multi_node])
def test_efa_devices_only_when_the_job_spans_nodes(instance_type: str) -> None:
    instance = CATALOG[instance_type]
    one, many = container_shape(instance_type, 1), container_shape(instance_type, 2)
    assert not one.efa and all(not d.mknod for d in one.devices)
    assert many.efa
    efa = [d for d in many.devices if d.path.startswith("/dev/infiniband/")]
    assert [d.path for d in efa] == [f"/dev/infiniband/uverbs{i}" for i in range(instance.efa_interfaces)]
    assert all(d.mknod for d in efa)
    assert [d.path for d in many.devices if not d.mknod] == [f"/dev/neuron{i}" for i in range(instance.chips)]
    nodes = batch.build_job_definition(container_plan(spec(instance_type, 2)), BATCH_SETTINGS)["nodeProperties"]
    rendered = nodes["nodeRangeProperties"][0]["container"]["linuxParameters"]["devices"]
    assert _paths(rendered) == [
        (d.path, frozenset({"READ", "WRITE", "MKNOD"} if d.mknod else {"READ", "WRITE"})) for d in many.devices
    ]


def test_a_layout_without_nodes_is_refused() -> None:
    with pytest.raises(ValueError, match="nodes must be >= 1"):
        container_shape("trn1.32xlarge", 0)
