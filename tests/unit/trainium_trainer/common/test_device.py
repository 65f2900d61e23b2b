"""The runtime a trainer process picks (``trainium_trainer.common.device``)."""

from __future__ import annotations

import os

import pytest

from trainium_trainer import boundary
from trainium_trainer.common import device


def test_the_runtime_variable_forces_one_of_the_three_and_nothing_else(monkeypatch):
    monkeypatch.setenv(boundary.ENV_RUNTIME, " Eager ")
    assert device.detect_runtime() == "eager"
    monkeypatch.setenv(boundary.ENV_RUNTIME, "gpu")
    with pytest.raises(ValueError, match="TRAINIUM_RUNTIME='gpu'; allowed: neuron, xla, eager"):
        device.detect_runtime()


def test_an_eager_run_keeps_transformers_and_accelerate_off_torch_xla(monkeypatch):
    """Both import torch-xla at their own import wherever it is installed unless told not to; an eager rank pays
    1.2 CPU-s for nothing. A value the job's environment sets is kept."""
    monkeypatch.setenv(boundary.ENV_RUNTIME, "eager")
    monkeypatch.delenv(device.TRANSFORMERS_USE_XLA, raising=False)
    runtime = device.init_runtime()
    assert (runtime.name, runtime.device.type, runtime.is_xla) == ("eager", "cpu", False)
    assert os.environ[device.TRANSFORMERS_USE_XLA] == "0"
    monkeypatch.setenv(device.TRANSFORMERS_USE_XLA, "1")
    device.init_runtime()
    assert os.environ[device.TRANSFORMERS_USE_XLA] == "1"
