"""Job definitions built from the spec, field by field against the Trainium facts (DESIGN.md section 4)."""

import pytest

from airflow_provider_trainium.compute.batch import definitions as defs
from airflow_provider_trainium.neuron.plan import container_plan
from airflow_provider_trainium.neuron.releases import auto_stack
from airflow_provider_trainium.neuron.spec import JobSpec, JobSpecError

SETTINGS = defs.BatchSettings(region_name="us-east-1", log_group="/trainium/jobs", job_role_arn="arn:role/job")
IMAGE = "acct.dkr.ecr.us-east-1.amazonaws.com/trainium:2.31"

# instance -> (chips = /dev/neuron*, EFA interfaces, NeuronCores per node, vCPU, host GiB), from DESIGN.md section 4
FACTS = {
    "trn1.32xlarge": (16, 8, 32, 128, 512),
    "trn1n.32xlarge": (16, 16, 32, 128, 512),
    "trn2.48xlarge": (16, 16, 64, 192, 2048),
    "trn3.48xlarge": (16, 16, 64, 192, 2048),
}


def spec(instance_type: str = "trn1.32xlarge", nodes: int = 4, **changes) -> JobSpec:
    values = dict(name="train", entry_point="trainium_trainer.allreduce", args=("--x", "1"),
                  instance_type=instance_type, nodes=nodes, image=IMAGE, timeout_seconds=7200, output_uri="s3://bucket/runs/1",
                  stack=auto_stack(instance_type))  # fmt: skip
    values.update(changes)
    return JobSpec(**values).validate()


LAYOUTS = [("trn1.32xlarge", 4), ("trn1n.32xlarge", 2), ("trn2.48xlarge", 2), ("trn3.48xlarge", 2)]


@pytest.mark.parametrize(("instance_type", "nodes"), LAYOUTS)
def test_multinode_definition_field_by_field(instance_type, nodes):
    chips, efa, cores, vcpus, mem_gib = FACTS[instance_type]
    s = spec(instance_type, nodes)
    definition = defs.build_job_definition(container_plan(s), SETTINGS)

    assert definition["type"] == "multinode"
    assert definition["jobDefinitionName"].startswith(f"trainium-{instance_type.replace('.', '-')}-{nodes}x-")
    assert definition["platformCapabilities"] == ["EC2"] and definition["propagateTags"] is True
    assert definition["timeout"] == {"attemptDurationSeconds": 7200}
    props = definition["nodeProperties"]
    assert props["numNodes"] == nodes and props["mainNode"] == 0
    (node_range,) = props["nodeRangeProperties"]
    assert node_range["targetNodes"] == "0:"
    c = node_range["container"]
    assert c["image"] == IMAGE and c["instanceType"] == instance_type and c["jobRoleArn"] == "arn:role/job"
    # one vCPU and max(2 GiB, 5 %) of memory (whole GiB) stay with the host, as on ECS
    headroom_gib = -(-max(2048, int(mem_gib * 1024 * 0.05)) // 1024)
    assert c["resourceRequirements"] == [
        {"type": "VCPU", "value": str(vcpus - 1)},
        {"type": "MEMORY", "value": str((mem_gib - headroom_gib) * 1024)},
    ]
    devices = c["linuxParameters"]["devices"]
    neuron = [d for d in devices if d["hostPath"].startswith("/dev/neuron")]
    uverbs = [d for d in devices if d["hostPath"].startswith("/dev/infiniband/uverbs")]
    assert len(devices) == chips + efa
    assert [d["hostPath"] for d in neuron] == [f"/dev/neuron{i}" for i in range(chips)]
    assert all(d["containerPath"] == d["hostPath"] and d["permissions"] == ["READ", "WRITE"] for d in neuron)
    assert [d["hostPath"] for d in uverbs] == [f"/dev/infiniband/uverbs{i}" for i in range(efa)]
    assert all(d["permissions"] == ["READ", "WRITE", "MKNOD"] for d in uverbs)
    assert c["linuxParameters"]["sharedMemorySize"] == mem_gib * 1024 // 8
    ulimits = {u["name"]: (u["softLimit"], u["hardLimit"]) for u in c["ulimits"]}
    assert ulimits["memlock"] == (-1, -1)
    assert ulimits["nofile"][0] >= 65535
    env = {e["name"]: e["value"] for e in c["environment"]}
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1" and env["FI_EFA_FORK_SAFE"] == "1"
    assert env["MALLOC_ARENA_MAX"] == "64"
    # implicit async is the XLA release's; the native release deprecates it (neuron/releases.toml)
    implicit_async = "3" if auto_stack(instance_type) == "xla" else None
    assert env.get("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS") == implicit_async
    assert env["TRAINIUM_INSTANCE_TYPE"] == instance_type
    assert env["TRAINIUM_STACK"] == auto_stack(instance_type)  # native on trn2/trn3, xla on trn1
    assert "NEURON_RT_NUM_CORES" not in env  # torchrun ranks each get their own core
    assert "TRAINIUM_OUTPUT_URI" not in env  # per-run values go in the submit overrides
    assert c["logConfiguration"] == {
        "logDriver": "awslogs",
        "options": {"awslogs-group": "/trainium/jobs", "awslogs-region": "us-east-1"},
    }
    retry = definition["retryStrategy"]
    assert retry["evaluateOnExit"][0] == {"onStatusReason": "Host EC2*", "action": "RETRY"}
    assert retry["evaluateOnExit"][-1] == {"onReason": "*", "action": "EXIT"}
    assert retry["attempts"] > 1

    request = defs.submit_request(container_plan(s), job_name="j", job_queue="q", job_definition="d", tags={"a": "b"})
    (override,) = request["nodeOverrides"]["nodePropertyOverrides"]
    command = override["containerOverrides"]["command"]
    assert command[0].startswith("--")  # the launcher's arguments: the image's ENTRYPOINT is the launcher
    assert f"--nodes={nodes}" in command and f"--nproc-per-node={cores}" in command
    assert command[command.index("--") + 1 :] == ["--x", "1"]
    run_env = {e["name"]: e["value"] for e in override["containerOverrides"]["environment"]}
    assert run_env == {"TRAINIUM_OUTPUT_URI": "s3://bucket/runs/1"}
    defs.validate_node_overrides(definition, request)


@pytest.mark.parametrize("instance_type", ["trn1.2xlarge", "trn1.32xlarge"])
def test_single_node_job_is_a_container_job_without_efa_or_instance_type(instance_type):
    definition = defs.build_job_definition(container_plan(spec(instance_type, 1)), SETTINGS)
    assert definition["type"] == "container" and "nodeProperties" not in definition
    props = definition["containerProperties"]
    # Batch API reference, ContainerProperties.instanceType: not applicable to single-node container jobs
    assert "instanceType" not in props
    devices = props["linuxParameters"]["devices"]
    assert all(d["hostPath"].startswith("/dev/neuron") for d in devices)
    assert len(devices) == FACTS.get(instance_type, (1,))[0]


def test_multi_node_trn1_2xlarge_is_rejected_with_a_clear_error():
    with pytest.raises(JobSpecError, match="no EFA and runs on one node only"):
        spec("trn1.2xlarge", 2)
    unchecked = JobSpec(name="t", entry_point="m", instance_type="trn1.2xlarge", nodes=2, image=IMAGE)
    with pytest.raises(defs.BatchDefinitionError, match="trn1.2xlarge has no EFA"):
        defs.build_job_definition(container_plan(unchecked), SETTINGS)


def test_no_image_is_rejected_before_anything_is_built():
    with pytest.raises(defs.BatchDefinitionError, match="no image"):
        defs.build_job_definition(container_plan(spec(image=None)), SETTINGS)


def test_name_is_a_hash_of_content_shared_by_runs_and_changed_by_layout():
    base = defs.build_job_definition(container_plan(spec()), SETTINGS)["jobDefinitionName"]
    other_run = spec(output_uri="s3://bucket/runs/2", args=("--x", "2"), env={"TRAINIUM_SEED": "3"})
    assert defs.build_job_definition(container_plan(other_run), SETTINGS)["jobDefinitionName"] == base
    for changed in (spec(image=IMAGE + "-b"), spec(nodes=8), spec(timeout_seconds=3600)):
        assert defs.build_job_definition(container_plan(changed), SETTINGS)["jobDefinitionName"] != base


def test_node_overrides_must_target_the_definitions_node_ranges():
    s = spec()
    definition = defs.build_job_definition(container_plan(s), SETTINGS)
    request = defs.submit_request(container_plan(s), job_name="j", job_queue="q", job_definition="d", tags={})
    request["nodeOverrides"]["nodePropertyOverrides"][0]["targetNodes"] = "0"
    with pytest.raises(defs.BatchDefinitionError, match="NodeOverride targets should match"):
        defs.validate_node_overrides(definition, request)
    request["nodeOverrides"]["nodePropertyOverrides"][0]["targetNodes"] = "0:3"  # same nodes as "0:" for 4
    defs.validate_node_overrides(definition, request)
    request["nodeOverrides"]["numNodes"] = 2
    with pytest.raises(defs.BatchDefinitionError, match="numNodes=2 differs"):
        defs.validate_node_overrides(definition, request)
    request["nodeOverrides"].pop("numNodes")
    request["nodeOverrides"]["nodePropertyOverrides"][0]["targetNodes"] = "0:9"
    with pytest.raises(defs.BatchDefinitionError, match="outside nodes 0..3"):
        defs.validate_node_overrides(definition, request)
