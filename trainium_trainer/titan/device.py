"""The device TorchTitan trains on, and a CPU stand-in where there is no accelerator.

TorchTitan 0.2.2 picks its device once, at import of ``torchtitan.tools.utils`` (line 37):
``device_type = _get_available_device_type() or "cuda"``, then ``Trainer.__init__`` calls
``device_module.set_device(torch.device(f"{device_type}:{LOCAL_RANK}"))`` (``torchtitan/train.py`` line 90) and
``DeviceMemoryMonitor`` reads ``device_module.memory_stats``. On a host without an accelerator that is
``torch.cuda``: "RuntimeError: Found no NVIDIA driver on your system". On Trainium, TorchNeuron registers
``neuron`` as the PrivateUse1 backend, ``_get_available_device_type()`` returns it and nothing here applies.
Off it (CI, a laptop), :func:`use_cpu_when_no_accelerator` points TorchTitan at ``cpu`` (process group gloo,
from torch's device -> backend map) before TorchTitan is imported; the training code it runs is its own.
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace
from typing import Any

import torch


class CpuDeviceModule:
    """What TorchTitan calls on its ``device_module``, for ``cpu``: ``torch.cpu`` plus memory calls that report
    nothing (the host's memory is not a device's)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    @staticmethod
    def current_device() -> int:
        """An index, as ``torch.cuda`` gives: TorchTitan passes it to ``barrier(device_ids=[...])``, which takes
        ints (``torch.cpu.current_device()`` is the string ``"cpu"``)."""
        return 0

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        return "cpu"

    @staticmethod
    def get_device_properties(device: Any = None) -> Any:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return SimpleNamespace(total_memory=pages * page_size, name="cpu")

    @staticmethod
    def memory_stats(device: Any = None) -> dict[str, int]:
        return {}

    @staticmethod
    def reset_peak_memory_stats(device: Any = None) -> None:
        return None

    @staticmethod
    def empty_cache() -> None:
        return None


def accelerator() -> str | None:
    """The accelerator torch sees (``neuron`` with TorchNeuron, ``cuda``), None on a CPU-only host."""
    from torch._utils import _get_available_device_type

    found: str | None = _get_available_device_type()
    return found


def use_cpu_when_no_accelerator() -> str:
    """Make TorchTitan train on ``cpu`` when torch sees no accelerator; returns the device type it will use.

    TorchTitan's modules copy ``device_type`` by value at import (``parallel_dims``, ``metrics``, ...), some of
    them while ``import torchtitan`` runs, so the answer has to be ``cpu`` before TorchTitan is first imported:
    torch's own device lookup answers ``cpu`` for that import, and the memory calls go to
    :class:`CpuDeviceModule`.
    """
    found = accelerator()
    if found is not None:
        return found
    if any(name == "torchtitan" or name.startswith("torchtitan.") for name in sys.modules):
        raise RuntimeError("torchtitan was imported before its CPU device was set; set it first")
    import torch._utils as torch_utils

    lookup = torch_utils._get_available_device_type
    torch_utils._get_available_device_type = lambda: "cpu"
    try:
        import torchtitan.tools.utils as titan_utils
    finally:
        torch_utils._get_available_device_type = lookup
    cpu = CpuDeviceModule()
    titan_utils.device_module = cpu
    for name, module in list(sys.modules.items()):
        if name.startswith("torchtitan.") and getattr(module, "device_module", None) is torch.cpu:
            module.device_module = cpu  # type: ignore[attr-defined]  # a TorchTitan module's global, found above
    return "cpu"
