"""Local compute refuses a worker without the stack's trainer extra before anything starts, naming the extra."""

from __future__ import annotations

import importlib.util

import pytest

from airflow_provider_trainium.compute.local import extras


def without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """This worker as if ``modules`` were not installed (the lookup, not the import system, is what is asked)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name: None if name in modules else real(name))


def test_a_worker_without_numpy_is_told_to_install_the_trainer_extra(monkeypatch):
    without(monkeypatch, "numpy")
    problem = extras.missing_trainer_extra("trainium_trainer.mnist_mlp.prepare_data", "xla")
    assert problem is not None and "lacks numpy" in problem
    assert "pip install 'airflow-provider-trainium[trainer]'" in problem


def test_the_native_stack_names_its_own_extra_and_a_users_command_is_not_judged(monkeypatch):
    without(monkeypatch, "torch")
    assert "[native-trainer]" in (extras.missing_trainer_extra("trainium_trainer.titan.train", "native") or "")
    assert extras.missing_trainer_extra("my_team.train", "xla") is None


def test_a_worker_with_either_extra_passes_a_data_prep_job_whatever_its_stack(monkeypatch):
    pytest.importorskip("torch")
    without(monkeypatch, "torch_xla")  # the native extra's environment: a native DAG's data prep says xla
    assert extras.missing_trainer_extra("trainium_trainer.llama.data", "xla") is None
    assert extras.missing_trainer_extra("trainium_trainer.mnist_mlp.train", "native") is None
