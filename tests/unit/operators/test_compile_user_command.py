"""TrainiumCompileOperator on a user's program: the command runs unchanged, bounded only as the task asks.

The project's ``trainer.*`` entry points keep ``--compile-only --max-steps N``; a user's command, script or module
gets ``trial_steps_arg`` / ``trial_steps_env`` or nothing, under ``neuron_parallel_compile`` on the XLA stack.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.compute.base import JobHandle
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.neuron.container_contract import launcher_arguments
from airflow_provider_trainium.operators.compile import TrainiumCompileOperator
from tests.conftest import set_trainium_connection
from tests.task_instance import TaskInstanceStandIn as SharedTaskInstanceStandIn
from trainium_trainer.launch import build_command

TRIAL_FLAGS = ("--compile-only", "--max-steps")
NPC = "neuron_parallel_compile"


@dataclass
class TaskInstanceStandIn(SharedTaskInstanceStandIn):
    task_id: str = "compile"
    run_id: str = "manual__2026-12-01T00:00:00+00:00"


@pytest.fixture
def on_neuron(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Local compute standing in for a backend on Neuron hardware, which wraps a trial in neuron_parallel_compile."""
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    monkeypatch.setattr(LocalBackend, "compile_wrapper", lambda self: (NPC,))
    return tmp_path


def compile_op(**kwargs: Any) -> TrainiumCompileOperator:
    kwargs.setdefault("command", ["python", "train.py"])
    defaults = {"task_id": "compile", "compute": "local", "instance_type": "trn1.32xlarge", "trial_steps": 7}
    return TrainiumCompileOperator(**{**defaults, **kwargs})


def node_argv(op: TrainiumCompileOperator) -> list[str]:
    """What node 0 of the trial runs: the launcher's arguments the backend sends, turned into the command."""
    spec = op.prepare({"ti": TaskInstanceStandIn()}).spec
    return build_command(launcher_arguments(spec), {}, python="/image/python")


@pytest.mark.parametrize(
    ("program", "user_words"),
    [({"command": ["python", "train.py"]}, ["/image/python", "train.py"]),
     ({"command": None, "script": "train.py"}, ["/image/python", "train.py"]),
     ({"command": ["bash", "run.sh"]}, ["bash", "run.sh"])],
)  # fmt: skip
def test_a_users_command_runs_unchanged_under_neuron_parallel_compile(on_neuron, program, user_words):
    op = compile_op(job_args=["--lr", "3e-4"], **program)
    spec = op.prepare({"ti": TaskInstanceStandIn()}).spec
    assert spec.args == ("--lr", "3e-4") and spec.wrapper == (NPC,)
    assert not set(TRIAL_FLAGS) & set(launcher_arguments(spec))
    argv = node_argv(op)
    assert argv[0] == NPC and argv[1:3] == ["/image/python", "-m"]  # the wrapper runs the whole torchrun
    assert argv[argv.index("--no-python") + 1 :] == [*user_words, "--lr", "3e-4"]
    assert "MAX_STEPS" not in spec.env


def test_a_users_module_is_a_users_program_too(on_neuron):
    op = compile_op(command=None, entry_point="mypkg.train", job_args=["--epochs", "1"])
    argv = node_argv(op)
    assert argv[0] == NPC and argv[-4:] == ["--module", "mypkg.train", "--epochs", "1"]


@pytest.mark.parametrize(
    ("arg", "words"),
    [("--max_steps", ["--max_steps", "7"]), ("trainer.max_steps=", ["trainer.max_steps=7"])],
)
def test_the_named_step_argument_bounds_the_trial(on_neuron, arg, words):
    op = compile_op(job_args=["--lr", "3e-4"], trial_steps_arg=arg)
    assert node_argv(op)[-len(words) - 2 :] == ["--lr", "3e-4", *words]
    assert op.job_args == ["--lr", "3e-4"]  # the task's own fields are never changed


def test_the_named_environment_variable_bounds_the_trial_and_wins_over_the_tasks_env(on_neuron):
    op = compile_op(env={"MAX_STEPS": "100000", "OTHER": "1"}, trial_steps_env="MAX_STEPS")
    spec = op.prepare({"ti": TaskInstanceStandIn()}).spec
    assert (spec.env["MAX_STEPS"], spec.env["OTHER"]) == ("7", "1")
    assert not set(TRIAL_FLAGS) & set(node_argv(op)) and op.env["MAX_STEPS"] == "100000"


def test_the_native_stack_runs_the_users_command_without_neuron_parallel_compile(on_neuron):
    op = compile_op(instance_type="trn2.48xlarge", stack="native", trial_steps_arg="--max_steps")
    spec = op.prepare({"ti": TaskInstanceStandIn()}).spec
    assert spec.wrapper == () and spec.args == ("--max_steps", "7")
    assert NPC not in node_argv(op)


def test_the_projects_trainer_keeps_its_own_trial_flags(on_neuron):
    op = compile_op(command=None, entry_point="trainium_trainer.mnist_mlp.train", job_args=["--batch-size", "32"])
    assert op.prepare({"ti": TaskInstanceStandIn()}).spec.args == ("--batch-size", "32", *TRIAL_FLAGS, "7")
    with pytest.raises(ValueError, match="project's trainer"):
        compile_op(command=None, entry_point="trainium_trainer.mnist_mlp.train", trial_steps_arg="--max_steps")


@pytest.mark.parametrize("name", ["AWS_MAX_STEPS", "PATH", "TRAINIUM_OUTPUT_DIR", "1BAD"])
def test_a_trial_variable_the_job_may_not_set_fails_when_the_dag_is_parsed(name):
    with pytest.raises(ValueError, match="trial_steps_env"):
        compile_op(trial_steps_env=name)


def test_the_key_names_the_users_command_and_not_the_trials_step_count(on_neuron):
    def key(**kwargs: Any) -> tuple[str, dict[str, Any]]:
        op = compile_op(**kwargs)
        prepared = op.prepare({"ti": TaskInstanceStandIn()})
        return op.key_for(prepared.spec, op.backend_for(prepared.compute))

    first, inputs = key(trial_steps_arg="--max_steps", job_args=["--hidden", "64"])
    assert inputs["command"] == ["python", "train.py"] and inputs["args"] == ["--hidden", "64"]
    assert key(trial_steps_arg="--max_steps", job_args=["--hidden", "64"], trial_steps=12)[0] == first
    assert key(trial_steps_arg="--max_steps", job_args=["--hidden", "128"])[0] != first
    assert key(command=["python", "other.py"], trial_steps_arg="--max_steps", job_args=["--hidden", "64"])[0] != first
    # the project's trainer keeps the key it always had: no command field
    _, project = key(command=None, entry_point="trainium_trainer.mnist_mlp.train")
    assert "command" not in project and "code_uri" not in project


def test_a_users_program_without_metrics_records_its_key_and_succeeds(on_neuron):
    from airflow_provider_trainium.operators.compile import read_key_record

    op = compile_op(trial_steps_env="MAX_STEPS")
    ti = TaskInstanceStandIn()
    prepared = op.prepare({"ti": ti})
    result = op.on_success({"ti": ti}, prepared.spec, JobHandle("local", "job-1", "job", {}))
    assert result["skipped"] is False and set(result) == {"compile_cache_uri", "cache_key", "skipped"}
    record = read_key_record(result["compile_cache_uri"], result["cache_key"])
    assert record is not None and record["metrics"] == {} and ti.xcoms["metrics"] == {}


STAND_IN_NPC = """#!/bin/sh
# neuron_parallel_compile's stand-in: say it ran, with what, then run the command it wraps.
echo "stand-in $*" >> "$NPC_LOG"
exec "$@"
"""

USER_SCRIPT = """
import json, os, sys
with open(os.environ["NPC_LOG"].replace("npc.log", "script.json"), "w") as out:
    json.dump({"argv": sys.argv[1:], "max_steps": os.environ.get("MAX_STEPS"), "cwd": os.getcwd(),
               "output_dir": os.environ.get("TRAINIUM_OUTPUT_DIR"), "pjrt": os.environ.get("PJRT_DEVICE")}, out)
"""


@pytest.mark.process
def test_a_users_script_runs_under_the_wrapper_on_local_compute(on_neuron, monkeypatch):
    """A real local run of a user's script on the XLA stack, with a neuron_parallel_compile stand-in on PATH."""
    from airflow_provider_trainium.compute.local import backend as local_backend

    tmp_path = on_neuron
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npc = bin_dir / NPC
    npc.write_text(STAND_IN_NPC)
    npc.chmod(npc.stat().st_mode | stat.S_IXUSR)
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(USER_SCRIPT)
    log = tmp_path / "npc.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    monkeypatch.setenv("TRAINIUM_JOB_DIR", str(tmp_path / "job"))
    monkeypatch.setattr(local_backend, "local_state_dir", lambda: tmp_path / "state")  # no job records left behind
    op = compile_op(script="train.py", command=None, code_dir=str(code), distributed=False, job_args=["--lr", "1"],
                    trial_steps_arg="--max_steps", trial_steps_env="MAX_STEPS", trial_steps=3,
                    env={"NPC_LOG": str(log)})  # fmt: skip
    result = op.execute({"ti": TaskInstanceStandIn()})  # type: ignore[arg-type]
    assert result["skipped"] is False and "cache_key" in result
    (wrapped,) = log.read_text().splitlines()
    assert wrapped.startswith(f"stand-in {sys.executable} ") and wrapped.endswith("train.py --lr 1 --max_steps 3")
    ran = json.loads((tmp_path / "script.json").read_text())
    assert ran["argv"] == ["--lr", "1", "--max_steps", "3"] and ran["max_steps"] == "3" and ran["pjrt"] == "CPU"
    assert ran["cwd"] == ran["output_dir"]
