"""The fine-tune's artifact key covers every param that changes what the job computes, its env-borne ones too.

``runtime`` reaches the trainer through the job's env (``dag_kit.RUNTIME_ENV``), not its args: a key that
ignored it would let an eager rerun resume (or skip to) the checkpoints an xla run left, and register them.
"""

from __future__ import annotations

import pytest

from airflow_provider_trainium.neuron.spec_key import finetune_spec_key

PARAMS = {"runtime": "xla", "stack": "auto", "max_steps": 30, "compute": "local", "log_every": 5}
BASE = "file:///r/models/base/versions/1/files"


def key(**changes: object) -> str:
    return finetune_spec_key({**PARAMS, **changes}, BASE, "fp1", manual=False)


@pytest.mark.parametrize("changes", [{"runtime": "eager"}, {"runtime": "auto"}, {"stack": "native"}])
def test_what_reaches_the_trainer_by_env_changes_the_key(changes):
    assert key(**changes) != key()


@pytest.mark.parametrize("changes", [{"compute": "batch"}, {"log_every": 1}])
def test_where_it_runs_and_how_often_it_logs_do_not(changes):
    assert key(**changes) == key()
