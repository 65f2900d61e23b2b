"""The native stack's device: ``neuron`` when TorchNeuron is present with a device, else ``cpu``.

TorchNeuron (the ``torch-neuronx`` package on Trn2/Trn3) registers Trainium with PyTorch as the ``PrivateUse1``
backend named ``neuron``: ``torch.neuron`` becomes its device module (``torch.neuron.is_available()``,
``torch.neuron.device_count()``), and PyTorch autoloads ``torch_neuronx`` on ``import torch`` unless
``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` (then an explicit ``import torch_neuronx`` registers it). Source: Neuron
docs, "torch.neuron and torch.accelerator reference"
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/torch-neuron-module.html).
Its process group backend is ``neuron`` (``dist.init_process_group(backend="neuron", init_method="env://")``
after ``import torch_neuronx``), and the same FSDP2/DTensor job runs on CPU with ``gloo``. Source: "How to use
torch.distributed on Neuron" (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html)
and its tutorial (.../torch/tutorials/tutorial-torch-distributed.html). ``torch.compile(backend="neuron")``
is TorchNeuron's TorchDynamo backend (same pages).

Unconfirmed here (no Trainium on this machine): ``torch.neuron.set_device`` (assumed by analogy with
``torch.cuda``; called only if it exists) and a rank's device being ``neuron:<LOCAL_RANK>``.

Nothing on this path imports torch-xla: ``torch_neuronx`` is the TorchNeuron package on the native image,
while on the XLA image the same name is the PyTorch/XLA plugin, which ``trainium_trainer.common.device`` uses.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch

from trainium_trainer.common.errors import BadInputError

NEURON = "neuron"
CPU = "cpu"
_Module = TypeVar("_Module", bound=torch.nn.Module)
#: Process group backend per device type.
BACKENDS = {NEURON: "neuron", CPU: "gloo"}
#: ``torch.compile`` backend per device type (``--compile``): TorchNeuron's on neuron, inductor on CPU.
COMPILE_BACKENDS = {NEURON: "neuron", CPU: "inductor"}
PRECISIONS = ("auto", "fp32", "bf16")


def neuron_module() -> Any | None:
    """``torch.neuron`` when TorchNeuron is registered (loading ``torch_neuronx`` if autoload was off)."""
    module = getattr(torch, NEURON, None)
    if module is None:
        try:
            importlib.import_module("torch_neuronx")
        except ImportError:
            return None
        module = getattr(torch, NEURON, None)
    return module if module is not None and hasattr(module, "is_available") else None


#: The host's Neuron devices, mapped into the container one per chip (``/dev/neuron0`` ...).
NEURON_DEVICE_GLOB = "neuron[0-9]*"


def host_has_neuron_devices(dev: Path = Path("/dev")) -> bool:
    return any(dev.glob(NEURON_DEVICE_GLOB))


def detect_device_type(
    neuron: Callable[[], Any | None] = neuron_module, host_devices: Callable[[], bool] = host_has_neuron_devices
) -> str:
    """``neuron`` when the device module says a device is available, else ``cpu``.

    ``cpu`` on a host whose Neuron devices are mapped in would train a paid Trainium job on its CPU, slowly and
    without an error: that is an image without TorchNeuron (the XLA image, or a broken native one), refused.
    """
    module = neuron()
    if module is not None and module.is_available() and module.device_count() > 0:
        return NEURON
    if host_devices():
        raise BadInputError(
            "this host has Neuron devices (/dev/neuron*) but no TorchNeuron device: the native stack needs an "
            "image with TorchNeuron (torch-neuronx of the native stack); run the XLA stack (stack=xla) on this "
            "image, or an image of the native stack"
        )
    return CPU


@dataclass(frozen=True)
class NativeDevice:
    """Where this rank computes, and the calls that differ between ``neuron`` and ``cpu``."""

    type: str
    index: int | None = None

    @property
    def device(self) -> torch.device:
        return torch.device(self.type) if self.index is None else torch.device(self.type, self.index)

    @property
    def backend(self) -> str:
        return BACKENDS[self.type]

    def bind(self) -> None:
        """Make this rank's device the current one (unconfirmed API on neuron: called only if present)."""
        module = getattr(torch, self.type, None)
        if self.type == NEURON and self.index is not None and module is not None and hasattr(module, "set_device"):
            module.set_device(self.index)

    def autocast(self, precision: str) -> contextlib.AbstractContextManager[Any]:
        """bf16 autocast (``auto``: bf16 on neuron, fp32 on cpu); a null context in fp32."""
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r}; allowed: {', '.join(PRECISIONS)}")
        if precision == "auto":
            precision = "bf16" if self.type == NEURON else "fp32"
        if precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.type, dtype=torch.bfloat16)

    def compile(self, module: _Module, enabled: bool) -> _Module:
        """``torch.compile`` with this device's backend when ``enabled`` (off by default: eager)."""
        if not enabled:
            return module
        module.compile(backend=COMPILE_BACKENDS[self.type])
        return module


def init_device(local_rank: int | None = None, device_type: str | None = None) -> NativeDevice:
    """This rank's device; ``neuron:<LOCAL_RANK>`` on Trainium, ``cpu`` otherwise."""
    kind = device_type or detect_device_type()
    if kind not in BACKENDS:
        raise ValueError(f"device type {kind!r}; allowed: {', '.join(BACKENDS)}")
    if local_rank is None:
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = NativeDevice(kind, local_rank if kind == NEURON else None)
    device.bind()
    return device
