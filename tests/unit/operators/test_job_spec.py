"""The job's timeout (``operators.job_spec``): a budget without an ``execution_timeout`` sets it, so the budget
check's worst case is the job's own and docs/byo.md's examples run as written. Metric patterns reach the launcher
only when they can make records, for a job that runs a command.

Two trn1.32xlarge nodes cost $43 an hour: a $50 budget affords 4186 s (1.163 h) of them, far under the 24 h
default that used to set the worst case (and refuse the job).
"""

from __future__ import annotations

import math
import re
import runpy
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException
from airflow.sdk import DAG
from airflow.sdk.definitions._internal.contextmanager import DagContext

from airflow_provider_trainium.neuron.pricing import PRICES
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from airflow_provider_trainium.operators.job_checks import (
    check_budget,
    check_neuron_driver,
    check_on_backend,
    check_trusted_image,
    check_write_uris,
    job_checks,
)
from airflow_provider_trainium.operators.job_spec import DEFAULT_TIMEOUT
from airflow_provider_trainium.params import budget_params
from tests.conftest import set_trainium_connection
from tests.unit.operators.test_job import context

REPO = Path(__file__).resolve().parents[3]
TWO_TRN1_32 = 2 * PRICES["trn1.32xlarge"].usd_per_hour
FIFTY_USD_S = math.floor(50 / TWO_TRN1_32 * 3600)


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())


def job(**kwargs: Any) -> TrainiumJobOperator:
    return TrainiumJobOperator(task_id="t", entry_point="m", compute="local", instance_type="trn1.32xlarge", **kwargs)


def test_a_budget_without_a_timeout_times_the_job_out_when_the_budget_is_spent(local, capfd) -> None:
    op = job(nodes=2, max_cost_usd=50)
    prepared = op.prepare(context())
    logged = "".join(capfd.readouterr())
    assert prepared.spec.timeout_seconds == FIFTY_USD_S
    assert op.job_timeout() == timedelta(seconds=FIFTY_USD_S)  # the wait's deadline and the deferral's timeout
    assert "the job's timeout is 1.163h, the longest max_cost_usd $50.00 affords for 2 x trn1.32xlarge" in logged
    assert "budget $50.00; worst case $50.00" in logged


def test_the_budget_default_is_never_longer_than_the_default_timeout(local) -> None:
    assert job(nodes=2, max_cost_usd="5000").prepare(context()).spec.timeout_seconds == DEFAULT_TIMEOUT.total_seconds()


def test_without_a_budget_the_timeout_is_the_default(local) -> None:
    op = job(nodes=2)
    assert op.prepare(context()).spec.timeout_seconds == DEFAULT_TIMEOUT.total_seconds()
    assert op.job_timeout() == DEFAULT_TIMEOUT


def test_the_dags_ceiling_is_the_budget_that_times_the_job(local) -> None:
    with DAG("ceiling", schedule=None, params=budget_params(ceiling_usd=50)) as dag:
        op = job(nodes=2)
    assert op.prepare({**context(), "dag": dag}).spec.timeout_seconds == FIFTY_USD_S


def test_a_given_timeout_is_kept_and_a_worst_case_over_budget_says_which_number_to_change(local) -> None:
    op = job(nodes=2, max_cost_usd=50, execution_timeout=timedelta(hours=2))
    with pytest.raises(AirflowFailException) as refused:
        op.prepare(context())
    message = str(refused.value)
    assert "worst case $86.00 exceeds max_cost_usd $50.00" in message
    assert "max_cost_usd to at least $86.00, execution_timeout to at most 1.163h or nodes to at most 1" in message
    within = job(nodes=2, max_cost_usd=50, execution_timeout=timedelta(hours=1))
    assert within.prepare(context()).spec.timeout_seconds == 3600


def test_a_budget_that_affords_under_a_minute_is_refused_before_anything_starts(local) -> None:
    with pytest.raises(AirflowFailException, match=r"max_cost_usd \$0\.50 affords 41 s of 2 x trn1\.32xlarge"):
        job(nodes=2, max_cost_usd=0.5).prepare(context())


# -- docs/byo.md's examples, as written ---------------------------------------------------------------------------
def byo_examples() -> list[str]:
    """The Python blocks of docs/byo.md that declare one job (the image example declares two: its build needs a
    builder, and tests/unit/test_user_guide.py declares it)."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "byo.md").read_text(), flags=re.S)
    runnable = []
    for block in blocks:
        try:
            compile(block, "byo.md", "exec")
        except SyntaxError:
            continue
        declares_a_job = "TrainiumJobOperator(" in block or "@task.trainium(" in block
        if declares_a_job and "TrainiumImageBuildOperator" not in block:
            runnable.append(block)
    return runnable


def test_the_byo_examples_are_found() -> None:
    examples = byo_examples()
    assert len(examples) == 2 and "max_cost_usd=50" in examples[0] and "script=" in examples[1]


@pytest.mark.parametrize("index", [0, 1], ids=["task.trainium", "script"])
def test_each_byo_example_passes_every_check_on_local_compute(local, tmp_path, monkeypatch, index) -> None:
    """The example's own arguments on local compute, through every check but the backend's own (it would read the
    example's secret, in an account that is not ours); its code bundle (a folder of the reader's) is left out."""
    dags: list[DAG] = []
    push = DagContext.push
    monkeypatch.setattr(DagContext, "push", classmethod(lambda cls, dag: (dags.append(dag), push(dag))))
    example = tmp_path / "example.py"
    example.write_text(byo_examples()[index])
    with DAG("byo_example", schedule=None):  # an example's operator outside a DAG of its own lands here
        runpy.run_path(str(example))
    declared = [task for dag in dags if dag is not None for task in dag.tasks if isinstance(task, TrainiumJobOperator)]
    (op,) = declared
    op.compute = "local"
    monkeypatch.setattr(op, "code_uri", lambda *args: None)
    checks = [check for check in job_checks(op) if check.func is not check_on_backend]
    assert [check.func for check in checks] == [check_write_uris, check_budget, check_trusted_image,
                                                check_neuron_driver]  # fmt: skip
    monkeypatch.setattr(op, "pre_submit_checks", lambda: checks)
    spec = op.prepare(context()).spec
    assert (spec.nodes, spec.instance_type) == (2, "trn1.32xlarge")
    expected = FIFTY_USD_S if op.max_cost_usd is not None else DEFAULT_TIMEOUT.total_seconds()
    assert spec.timeout_seconds == expected


def test_metric_patterns_reach_the_launcher_only_when_they_can_make_records():
    import json

    from airflow_provider_trainium.neuron.spec import JobSpecError
    from trainium_trainer import boundary

    hf = TrainiumJobOperator(task_id="hf", script="train.py", metric_patterns="huggingface")
    assert json.loads(hf.metric_patterns_env()[boundary.ENV_METRIC_PATTERNS]) == dict(boundary.HUGGING_FACE_PATTERNS)
    assert TrainiumJobOperator(task_id="plain", script="train.py").metric_patterns_env() == {}
    user_module = TrainiumJobOperator(task_id="m", entry_point="my_pkg.train", metric_patterns="huggingface")
    assert boundary.ENV_METRIC_PATTERNS in user_module.metric_patterns_env()  # a user's module is user code too
    refused = {
        "an unknown set": TrainiumJobOperator(task_id="a", script="t.py", metric_patterns="keras"),
        "no group": TrainiumJobOperator(task_id="b", script="t.py", metric_patterns={"loss": r"loss=\S+"}),
        "a project trainer": TrainiumJobOperator(
            task_id="c", entry_point="trainium_trainer.mnist_mlp.train", metric_patterns="huggingface"
        ),
    }
    for why, op in refused.items():
        with pytest.raises(JobSpecError):
            op.metric_patterns_env()
            pytest.fail(f"{why} was accepted")


def test_profile_steps_reach_the_trainer_as_first_last_and_bad_ones_fail_first():
    from airflow_provider_trainium.neuron.spec import JobSpecError
    from trainium_trainer import boundary

    profiled = TrainiumJobOperator(task_id="p", entry_point="trainium_trainer.mnist_mlp.train", profile_steps=(3, 4))
    assert profiled.profile_env() == {boundary.ENV_PROFILE_STEPS: "3:4"}
    assert TrainiumJobOperator(task_id="plain", script="train.py").profile_env() == {}
    for bad in [(4, 3), (0, 2), (1, 2, 3), "3:4", (1.0, 2), (True, 2)]:
        with pytest.raises(JobSpecError, match="profile"):
            TrainiumJobOperator(task_id="b", script="t.py", profile_steps=bad).profile_env()  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["output_uri", "checkpoint_uri"])
def test_a_job_that_would_write_outside_the_artifact_root_is_refused_before_submit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    """A templated ``output_uri``/``checkpoint_uri`` needed only a scheme (issue 45): now the try fails without
    retries before anything is found or submitted, naming the URI, the rule and the connection field; declaring
    the prefix in the connection's ``allowed_output_prefixes`` (not its input prefixes) lets the same job through."""
    outside = "s3://another-bucket/models"
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri(), allowed_input_prefixes=[outside])
    with pytest.raises(AirflowFailException, match=f"{field} '{outside}' refused: bounded writes.*allowed_output_"):
        job(**{field: outside}).prepare(context())
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri(), allowed_output_prefixes=[outside])
    assert getattr(job(**{field: outside}).prepare(context()).spec, field) == outside
