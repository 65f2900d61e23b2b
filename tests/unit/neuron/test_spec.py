import re

import pytest

from airflow_provider_trainium.neuron.spec import JobSpec, JobSpecError, env_name_problem


def spec(**changes):
    return JobSpec(name="job", entry_point="trainium_trainer.mnist_mlp.train", **changes)


def problems(**changes):
    return " | ".join(spec(**changes).problems())


def test_defaults_are_valid_and_use_every_neuron_core():
    s = spec().validate()
    assert s.nproc_per_node == 2
    assert spec(instance_type="trn1.32xlarge", nodes=4).validate().world_size == 128
    assert spec(instance_type="trn2.48xlarge").nproc_per_node == 64


def test_non_distributed_jobs_run_one_process():
    assert spec(instance_type="trn1.32xlarge", distributed=False).nproc_per_node == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"instance_type": "p5.48xlarge"},
            "instance_type 'p5.48xlarge' is not a Trainium instance type; allowed:",
        ),
        ({"nodes": 0}, "nodes must be an integer >= 1, got 0"),
        ({"nodes": 2}, "nodes=2 on trn1.2xlarge: this instance type has no EFA"),
        ({"instance_type": "trn1.32xlarge", "nodes": 65}, "nodes must be between 1 and 64"),
        (
            {"instance_type": "trn1.32xlarge", "tensor_parallel_size": 6},
            "tensor_parallel_size=6 does not divide",
        ),
        ({"processes_per_node": 3}, "processes_per_node must be between 1 and 2"),
        ({"timeout_seconds": 5}, "timeout_seconds must be between 60"),
        (
            {"output_uri": "gs://bucket/x"},
            "output_uri 'gs://bucket/x' must start with one of: file://, s3://",
        ),
        ({"env": {"BAD-NAME": "1"}}, "env name 'BAD-NAME' is not a valid environment variable name"),
        ({"workload": "vision"}, "workload 'vision' is not one of: default, llm"),
    ],
)
def test_bad_specs_name_the_field_and_the_allowed_values(changes, message):
    with pytest.raises(JobSpecError) as err:
        spec(**changes).validate()
    assert message in str(err.value)


def test_tensor_parallel_message_lists_the_divisors():
    assert "allowed: 1, 2, 4, 8, 16, 32" in problems(instance_type="trn1.32xlarge", tensor_parallel_size=6)


def test_tensor_parallel_8_is_refused_on_trn2_only():
    """neuronx-distributed cannot place 8x8 replica groups at logical NeuronCore size 2 (get_logic_chosen)."""
    message = problems(instance_type="trn2.48xlarge", tensor_parallel_size=8)
    assert "tensor_parallel_size=8 on trn2.48xlarge is not supported" in message and "get_logic_chosen" in message
    assert problems(instance_type="trn1.32xlarge", tensor_parallel_size=8) == ""
    for size in (4, 16, 32, 64):
        assert problems(instance_type="trn2.48xlarge", tensor_parallel_size=size) == ""


def test_every_problem_is_reported_at_once():
    with pytest.raises(JobSpecError) as err:
        JobSpec(name="", entry_point="not a module", instance_type="x", nodes=0).validate()
    assert len(err.value.problems) == 4


def test_round_trip_and_stable_hash():
    s = spec(args=("--epochs", "3"), env={"NEURON_A": "1"}, wrapper=("neuron_parallel_compile",))
    again = JobSpec.from_dict(s.to_dict())
    assert again == s
    assert again.content_hash() == s.content_hash()
    assert spec(args=("--epochs", "4")).content_hash() != s.content_hash()


def test_the_default_stack_keeps_the_hash_specs_had_before_stacks_existed():
    """Running jobs are named by their spec's hash: an xla spec must hash as it did (computed before ``stack``; the
    entry point is the one of that time, before the in-container package was renamed)."""
    s = JobSpec(name="train", entry_point="trainer.llama.train", args=("--steps", "10"), env={"NEURON_A": "1"},
                instance_type="trn2.48xlarge", nodes=2, output_uri="s3://b/runs/1")  # fmt: skip
    assert s.stack == "xla" and "stack" not in s.to_dict()
    assert s.content_hash() == "b8f6524bc364"
    native = s.with_changes(stack="native")
    assert native.to_dict()["stack"] == "native" and native.content_hash() != s.content_hash()
    assert JobSpec.from_dict(native.to_dict()) == native and JobSpec.from_dict(s.to_dict()) == s


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"stack": "auto"}, "stack 'auto' is not one of: xla, native"),  # the operator resolves auto first
        (
            {"stack": "native", "instance_type": "trn1.32xlarge"},
            "stack 'native' does not train on trn1 (trn1.32xlarge)",
        ),
        ({"stack": "xla", "instance_type": "trn3.48xlarge"}, "stack 'xla' does not train on trn3 (trn3.48xlarge)"),
        ({"env": {"TRAINIUM_STACK": "native"}}, "env name 'TRAINIUM_STACK' is set by the backend"),
    ],
)
def test_the_stack_is_checked_against_the_release_table(changes, message):
    with pytest.raises(JobSpecError, match=re.escape(message)):
        spec(**changes).validate()
    assert spec(stack="native", instance_type="trn3.48xlarge").validate().stack == "native"
    assert spec(stack="xla", instance_type="trn2.48xlarge").validate().stack == "xla"


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("LD_PRELOAD", "env name 'LD_PRELOAD' is not allowed: a job may set any variable but "),
        ("PYTHONPATH", "env name 'PYTHONPATH' is not allowed"),
        ("PATH", "env name 'PATH' is not allowed"),
        ("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", "is not allowed"),
        ("TRAINIUM_MASTER_ADDR", "env name 'TRAINIUM_MASTER_ADDR' is set by the backend for every node"),
        ("TRAINIUM_LAUNCH_DRY_RUN", "is set by the backend for every node"),
        ("TRAINIUM_OUTPUT_DIR", "is set by the backend for every node"),
        ("RANK", "env name 'RANK' is not allowed"),
        ("TORCHELASTIC_RUN_ID", "is not allowed"),
    ],
)
def test_env_names_on_the_denylist_are_refused_naming_the_rule(name, rule):
    with pytest.raises(JobSpecError) as err:
        spec(env={name: "x"}).validate()
    assert rule in str(err.value)


@pytest.mark.parametrize(
    "name",
    ["NEURON_CC_FLAGS", "XLA_FLAGS", "PJRT_DEVICE", "FI_EFA_FORK_SAFE", "TRAINIUM_RUNTIME", "MALLOC_ARENA_MAX",
     "AWS_ACCESS_KEY_ID", "AWS_ENDPOINT_URL", "HF_TOKEN", "WANDB_API_KEY", "HF_HOME", "USE_TORCH_XLA", "MY_SETTING"],
)  # fmt: skip
def test_any_other_env_name_passes(name):
    spec(env={name: "x"}).validate()


@pytest.mark.parametrize(
    "name",
    ["BASH_ENV", "ENV", "GCONV_PATH", "GLIBC_TUNABLES", "LD_DEBUG", "LD_BIND_NOW", "PYTHONWARNINGS",
     "PYTHONBREAKPOINT", "PYTHONUNBUFFERED", "NLSPATH", "TRAINIUM_ALLOWED_INPUT_PREFIXES"],
)  # fmt: skip
def test_a_tasks_own_env_may_not_load_code_or_replace_the_providers_input_rule(name):
    """By family: every LD_* and PYTHON* (the provider sets the plan's own), shells' startup files, glibc's list."""
    assert f"{name!r} is not allowed" in (env_name_problem(name, user=True) or "")


@pytest.mark.parametrize("name", ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"])
def test_a_tasks_own_env_may_not_set_aws_variables(name):
    """The provider sets local compute's AWS variables; a task's env would put credentials in a DAG."""
    assert env_name_problem(name) is None
    assert "AWS_*" in (env_name_problem(name, user=True) or "")
