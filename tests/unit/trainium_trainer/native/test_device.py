"""The native stack's device choice and per-device calls, with TorchNeuron absent or faked."""

from __future__ import annotations

import pytest
import torch

from trainium_trainer.common.errors import BadInputError
from trainium_trainer.common.stack import selected_stack
from trainium_trainer.native import device as native


class FakeNeuron:
    def __init__(self, available: bool, count: int) -> None:
        self.available, self.count = available, count

    def is_available(self) -> bool:
        return self.available

    def device_count(self) -> int:
        return self.count


def test_cpu_without_torchneuron_here():
    assert native.neuron_module() is None  # this venv has no TorchNeuron
    assert native.detect_device_type() == "cpu"


@pytest.mark.parametrize(("available", "count", "expected"), [(True, 2, "neuron"), (True, 0, "cpu"), (False, 8, "cpu")])
def test_neuron_only_with_an_available_device(available, count, expected):
    assert native.detect_device_type(lambda: FakeNeuron(available, count), lambda: False) == expected


def test_a_trainium_host_without_torchneuron_is_refused_not_trained_on_its_cpu(tmp_path):
    (tmp_path / "neuron0").touch()
    assert native.host_has_neuron_devices(tmp_path) and not native.host_has_neuron_devices(tmp_path / "none")
    with pytest.raises(BadInputError, match="no TorchNeuron device"):
        native.detect_device_type(lambda: None, lambda: native.host_has_neuron_devices(tmp_path))
    assert native.detect_device_type(lambda: FakeNeuron(True, 2), lambda: True) == "neuron"


def test_cpu_device_ignores_the_local_rank_and_uses_gloo():
    device = native.init_device(local_rank=3, device_type="cpu")
    assert device.device == torch.device("cpu") and device.backend == "gloo"
    assert native.COMPILE_BACKENDS["cpu"] == "inductor"


def test_neuron_device_is_the_local_rank_with_the_neuron_backend():
    device = native.NativeDevice("neuron", 3)
    assert (device.type, device.index, device.backend) == ("neuron", 3, "neuron")
    assert native.COMPILE_BACKENDS["neuron"] == "neuron"


def test_unknown_device_type_is_refused():
    with pytest.raises(ValueError, match="cuda"):
        native.init_device(0, "cuda")


def test_bf16_autocast_on_cpu_and_fp32_by_default():
    device = native.NativeDevice("cpu")
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with device.autocast("bf16"):
        assert (a @ b).dtype == torch.bfloat16
    with device.autocast("auto"):  # auto is fp32 on the CPU
        assert (a @ b).dtype == torch.float32
    with pytest.raises(ValueError, match="fp16"):
        device.autocast("fp16")


def test_compile_is_off_unless_asked():
    device, module = native.NativeDevice("cpu"), torch.nn.Linear(2, 2)
    assert device.compile(module, enabled=False) is module and module._compiled_call_impl is None
    device.compile(module, enabled=True)
    assert module._compiled_call_impl is not None


@pytest.mark.parametrize(("value", "expected"), [(None, "xla"), ("", "xla"), ("native", "native"), (" XLA ", "xla")])
def test_stack_defaults_to_xla(value, expected):
    env = {} if value is None else {"TRAINIUM_STACK": value}
    assert selected_stack(env) == expected


def test_unknown_stack_is_bad_input():
    with pytest.raises(BadInputError, match="TRAINIUM_STACK='torchtitan'"):
        selected_stack({"TRAINIUM_STACK": "torchtitan"})
