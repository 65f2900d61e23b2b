"""What a local job inherits from the worker: the built-in allowlist, the connection's additions, nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.compute.local.environment import inherited_environment, node_environment
from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig
from airflow_provider_trainium.neuron.plan import container_plan
from airflow_provider_trainium.neuron.spec import JobSpec

WORKER = {
    "PATH": "/usr/bin", "HOME": "/home/w", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "VIRTUAL_ENV": "/venv",
    # what loads code or reaches the platform: issue 45 found every one of these in a local job
    "PYTHONPATH": "/tmp/evil", "LD_LIBRARY_PATH": "/tmp/evil", "PYTHONHASHSEED": "0",
    "TRAINIUM_ALLOWED_INPUT_PREFIXES": '["file:///"]', "NEURON_RT_LOG_LEVEL": "INFO", "XLA_FLAGS": "--x",
    "PJRT_DEVICE": "TPU", "TPU_NAME": "t", "HF_HOME": "/hf", "OMP_NUM_THREADS": "8",
    "AWS_SECRET_ACCESS_KEY": "worker-secret",
}  # fmt: skip


def test_a_local_job_keeps_only_what_any_python_process_needs() -> None:
    assert inherited_environment(WORKER) == {
        "PATH": "/usr/bin", "HOME": "/home/w", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "VIRTUAL_ENV": "/venv",
    }  # fmt: skip


def test_the_connection_names_more_variables_by_name_or_prefix() -> None:
    kept = inherited_environment(WORKER, ("HF_HOME", "OMP_*", "XLA_FLAGS"))
    assert {k: kept[k] for k in ("HF_HOME", "OMP_NUM_THREADS", "XLA_FLAGS")} == {
        "HF_HOME": "/hf", "OMP_NUM_THREADS": "8", "XLA_FLAGS": "--x",
    }  # fmt: skip
    assert "NEURON_RT_LOG_LEVEL" not in kept and "PYTHONPATH" not in kept


@pytest.mark.parametrize(
    "entry",
    ["PYTHONPATH", "PYTHON*", "PY*", "LD_LIBRARY_PATH", "LD_*", "L*", "BASH_ENV", "ENV", "GCONV_PATH", "AWS_PROFILE",
     "TRAINIUM_ALLOWED_INPUT_PREFIXES", "TRAINIUM_*", "*", "NEURON_*", "MASTER_ADDR"],
)  # fmt: skip
def test_the_connection_may_not_pass_what_loads_code_or_the_providers_own(entry: str) -> None:
    """The job-env rule (``neuron.spec.env_name_problem``) holds for inherited variables too; a prefix that could
    match one of its names is refused whole (``NEURON_*`` would pass ``NEURON_RT_VISIBLE_CORES``)."""
    with pytest.raises(ValueError, match=r"local_inherited_env(\.0)?: "):
        TrainiumConfig.from_extra({"local_inherited_env": [entry]})


def test_the_connection_field_reaches_the_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", "/hf")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("PYTHONPATH", "/tmp/evil")
    monkeypatch.setattr("airflow_provider_trainium.compute.local.backend.local_state_dir", lambda: tmp_path)
    monkeypatch.setattr("airflow_provider_trainium.compute.local.backend.keep_work_folders_setting", lambda: False)
    config = TrainiumConfig.from_extra({"local_inherited_env": "HF_HOME, OMP_*"})
    assert config.local_inherited_env == ("HF_HOME", "OMP_*")
    backend = LocalBackend.from_config(config, {})
    plan = container_plan(JobSpec(name="t", entry_point="trainium_trainer.mnist_mlp.train"), on_trainium=False)
    env = backend.node_environment(plan, "j", 0, 41000, tmp_path)
    assert (env["HF_HOME"], env["OMP_NUM_THREADS"]) == ("/hf", "3") and "PYTHONPATH" not in env


@pytest.mark.parametrize(("stack", "device"), [("xla", "CPU"), ("native", None)])
def test_local_xla_jobs_run_on_the_cpu_whatever_the_worker_says(tmp_path: Path, stack: str, device: str) -> None:
    """``PJRT_DEVICE=CPU`` comes from local compute for the XLA stack, not from the worker (whose ``TPU`` stays
    behind); the native stack has no torch-xla to tell; a job's own env still wins."""
    spec = JobSpec(name="t", entry_point="trainium_trainer.mnist_mlp.train", stack=stack,
                   instance_type="trn1.32xlarge" if stack == "xla" else "trn2.48xlarge")  # fmt: skip
    env = node_environment(WORKER, container_plan(spec, on_trainium=False), "j", 0, 41000, tmp_path)
    assert env.get("PJRT_DEVICE") == device
    own = spec.with_changes(env={"PJRT_DEVICE": "CUDA"})
    assert (
        node_environment(WORKER, container_plan(own, on_trainium=False), "j", 0, 41000, tmp_path)["PJRT_DEVICE"]
        == "CUDA"
    )
