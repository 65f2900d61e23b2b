"""The compile-cache key on the native stack: the stack and torch.compile backend count, XLA keys are unchanged,
and the operator keys a local trial by this machine's torch and a Trainium one by its image."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle, JobStatus
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.neuron.compile_key import cache_key, key_inputs, native_compiler_version
from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.operators.compile import TrainiumCompileOperator


def spec(*args: str, **changes) -> JobSpec:
    base = JobSpec(
        name="mnist",
        entry_point="trainium_trainer.mnist_mlp.train",
        instance_type="trn2.48xlarge",
        stack="native",
        processes_per_node=2,
        image="123.dkr.ecr.us-east-1.amazonaws.com/trainium:native-1",
        args=("--data-uri", "s3://b/2026-01-01", "--batch-size", "32", "--compile", *args),
    )
    return base.with_changes(**changes)


def key(s: JobSpec, backend: str = "inductor", version: str = "torch==2.9.0") -> str:
    return cache_key(key_inputs(s, version, compile_backend=backend))


def test_xla_keys_carry_no_native_fields_so_recorded_caches_keep_their_keys():
    inputs = key_inputs(spec(stack="xla", instance_type="trn1.32xlarge"), "torch-xla==2.9.0")
    assert "stack" not in inputs and "compile_backend" not in inputs
    # and the backend argument cannot move an XLA key
    xla = spec(stack="xla", instance_type="trn1.32xlarge")
    assert key(xla, "neuron") == key(xla, "inductor")


def test_native_key_covers_stack_backend_shapes_and_layout_but_not_locations():
    reference = key(spec())
    inputs = key_inputs(spec(), "torch==2.9.0", compile_backend="inductor")
    assert (inputs["stack"], inputs["compile_backend"]) == ("native", "inductor")
    assert key(spec(), "neuron") != reference
    assert key(spec(), version="torch==2.9.0+torch-neuronx==2.14.3.0") != reference
    assert key(spec("--precision", "bf16")) != reference
    assert key(spec(args=("--data-uri", "s3://b/x", "--batch-size", "32"))) != reference  # eager: no --compile
    assert key(spec(args=("--data-uri", "s3://b/x", "--batch-size", "64", "--compile"))) != reference
    assert key(spec(processes_per_node=1)) != reference
    assert key(spec(tensor_parallel_size=2)) != reference
    assert key(spec(stack="xla")) != reference
    moved = spec(args=("--data-uri", "s3://b/2026-02-02", "--batch-size", "32", "--compile", "--max-steps", "10",
                       "--output-uri", "s3://b/out", "--compile-only"))  # fmt: skip
    assert key(moved) == reference


def test_an_unknown_compile_backend_is_refused():
    with pytest.raises(ValueError, match="compile backend 'cudagraphs'"):
        key_inputs(spec(), "torch==2.9.0", compile_backend="cudagraphs")


def test_native_compiler_version_is_this_machines_torch():
    assert native_compiler_version().split("+")[0] == f"torch=={version('torch')}"


class Trainium(ComputeBackend):
    """A backend that runs the image on Trainium; the key needs nothing of it but what the base class says."""

    name = "trainium"

    def submit(self, spec: JobSpec, job_name: str, tags: dict[str, str]) -> JobHandle:
        raise AssertionError("the key submits nothing")

    def find_existing(self, job_name: str, tags: dict[str, str]) -> JobHandle | None:
        return None

    def status(self, handle: JobHandle) -> JobStatus:
        raise AssertionError("the key polls nothing")

    def cancel(self, handle: JobHandle, reason: str) -> None:
        return None


def test_operator_keys_a_local_native_trial_by_torch_and_inductor_and_a_trainium_one_by_image(tmp_path):
    op = TrainiumCompileOperator(task_id="compile", entry_point="trainium_trainer.mnist_mlp.train", job_args=[])
    _, local = op.key_for(spec(), LocalBackend(tmp_path))
    assert local["compiler_version"] == native_compiler_version()
    assert local["compile_backend"] == "inductor"  # this machine: torch-xla's plugin at most, no TorchNeuron
    _, remote = op.key_for(spec(), Trainium())
    assert remote["compiler_version"] == f"image:{spec().image}" and remote["compile_backend"] == "neuron"
    _, xla = op.key_for(spec(stack="xla"), LocalBackend(tmp_path))
    assert xla["compiler_version"].startswith("torch-xla==") and "compile_backend" not in xla
