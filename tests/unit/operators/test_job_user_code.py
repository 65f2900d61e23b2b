"""TrainiumJobOperator's faces for a user's code: exactly one of module, command and script; the task's env rule."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.operators.job import TrainiumJobOperator


@pytest.mark.parametrize(
    "what",
    [{}, {"entry_point": "m", "command": ["python", "x.py"]}, {"command": ["bash"], "script": "x.py"}],
)
def test_exactly_one_of_entry_point_command_and_script(what):
    with pytest.raises(ValueError, match="exactly one of entry_point, command and script"):
        TrainiumJobOperator(task_id="t", **what)


def test_a_script_is_python_running_it():
    assert TrainiumJobOperator(task_id="t", script="train.py").command == ["python", "train.py"]


def test_a_tasks_env_may_set_application_variables_but_no_aws_credentials():
    env = {"HF_TOKEN_FILE": "/x", "WANDB_PROJECT": "p", "AWS_SECRET_ACCESS_KEY": "k"}
    operator = TrainiumJobOperator(task_id="t", script="train.py", env=env)
    (problem,) = operator.user_env_problems()
    assert "AWS_SECRET_ACCESS_KEY" in problem and "AWS_*" in problem


def test_command_is_not_templated_so_a_run_cannot_choose_what_runs():
    assert (
        "command" not in TrainiumJobOperator.template_fields and "code_dir" not in TrainiumJobOperator.template_fields
    )
    assert "job_args" in TrainiumJobOperator.template_fields
