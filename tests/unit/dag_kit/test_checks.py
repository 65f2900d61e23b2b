"""The first task's checks: a layout, stack, input or image a run cannot use is refused before anything starts."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_provider_trainium.dag_kit.checks import check_run

GOOD = {"instance_type": "trn1.32xlarge", "nodes": 2, "compute": "local", "image": None}


def test_check_run_refuses_what_cannot_run(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", raising=False)
    assert check_run(GOOD, entry_point="trainium_trainer.allreduce").configured is False
    with pytest.raises(AirflowFailException, match="trn1.2xlarge"):
        check_run({**GOOD, "instance_type": "trn1.2xlarge"}, entry_point="trainium_trainer.allreduce")
    with pytest.raises(AirflowFailException, match="tensor"):
        check_run({**GOOD, "tensor_parallel_size": 3}, entry_point="trainium_trainer.llama.train")
    with pytest.raises(AirflowFailException, match="tensor_parallel_size=8 on trn2.48xlarge"):
        trn2 = {**GOOD, "instance_type": "trn2.48xlarge", "tensor_parallel_size": 8}
        check_run(trn2, entry_point="trainium_trainer.llama.train")
    with pytest.raises(AirflowFailException, match="input_uri"):
        check_run({**GOOD, "input_uri": "s3://elsewhere/x"}, entry_point="t", inputs=["input_uri"])
    with pytest.raises(AirflowFailException):
        check_run({**GOOD, "image": "evil.example/x@sha256:" + "0" * 64}, entry_point="trainium_trainer.allreduce")


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"instance_type": "trn1.32xlarge", "stack": "native"}, r"stack 'native' does not train on trn1 .*'xla'"),
     ({"instance_type": "trn3.48xlarge", "stack": "xla"}, r"stack 'xla' does not train on trn3 .*'native'")],
)  # fmt: skip
def test_check_run_refuses_a_stack_the_family_cannot_train_even_on_local_compute(
    monkeypatch: pytest.MonkeyPatch, tmp_path, changes, message
) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", raising=False)
    with pytest.raises(AirflowFailException, match=message):
        check_run({**GOOD, **changes}, entry_point="trainium_trainer.llama.train")


@pytest.mark.parametrize(
    "changes",
    [{}, {"stack": "auto"}, {"stack": "xla"}, {"instance_type": "trn2.48xlarge", "stack": "native"},
     {"instance_type": "trn3.48xlarge", "stack": "auto"}],
)  # fmt: skip
def test_check_run_lets_local_compute_run_a_stack_its_stand_in_family_trains(
    monkeypatch: pytest.MonkeyPatch, tmp_path, changes
) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", raising=False)
    assert check_run({**GOOD, **changes}, entry_point="trainium_trainer.llama.train").configured is False
