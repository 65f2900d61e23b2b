"""Which device the trainer runs on, and the few calls that differ between them.

Three runtimes, most capable first:
- ``neuron``: torch-neuronx present (the training image on Trn1/Trn2): NeuronCores through PyTorch/XLA.
- ``xla``: torch-xla without the Neuron plugin (PJRT CPU here): the same XLA code path, on the CPU.
- ``eager``: plain PyTorch on the CPU.
``TRAINIUM_RUNTIME`` forces one (for example ``eager`` to compare speeds).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import TypeVar, cast

import torch

from trainium_trainer import boundary

_T = TypeVar("_T")

RUNTIMES = ("neuron", "xla", "eager")
#: What transformers and accelerate read, once, when they are imported, to decide whether to load torch-xla.
TRANSFORMERS_USE_XLA = "USE_TORCH_XLA"


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def detect_runtime() -> str:
    forced = os.environ.get(boundary.ENV_RUNTIME, "").strip().lower()
    if forced:
        if forced not in RUNTIMES:
            raise ValueError(f"{boundary.ENV_RUNTIME}={forced!r}; allowed: {', '.join(RUNTIMES)}")
        return forced
    if _available("torch_neuronx"):
        return "neuron"
    if _available("torch_xla"):
        return "xla"
    return "eager"


@dataclass
class Runtime:
    name: str
    device: torch.device

    @property
    def is_xla(self) -> bool:
        return self.name in ("neuron", "xla")

    def step(self) -> None:
        """Cut the lazy XLA graph here (a no-op in eager mode)."""
        if self.is_xla:
            import torch_xla

            torch_xla.sync()

    def wait(self) -> None:
        """Block until every queued XLA graph has run (a no-op in eager mode).

        Their inputs, host buffers included, have then been consumed, so those buffers may be refilled.
        """
        if self.is_xla:
            import torch_xla.core.xla_model as xm

            xm.wait_device_ops()

    def compilations(self) -> int:
        """XLA graphs compiled by this process so far (0 in eager mode)."""
        if not self.is_xla:
            return 0
        import torch_xla.debug.metrics as met

        data = met.metric_data("CompileTime")
        return int(data[0]) if data else 0

    def activity(self) -> dict[str, int]:
        """XLA graphs compiled and run, and device-to-host transfers (each a host sync), so far (0 in eager mode).

        Differences of these around a training loop show what each step costs the host: a loop at the floor
        runs one graph per step (two with gradients reduced through the host) and reads nothing back but the
        logged losses.
        """
        if not self.is_xla:
            return {"compiled": 0, "executed": 0, "host_transfers": 0}
        import torch_xla.debug.metrics as met

        transfers = met.metric_data("TransferFromDeviceTime")
        return {
            "compiled": self.compilations(),
            "executed": int(met.counter_value("ExecuteComputation") or 0),
            "host_transfers": int(transfers[0]) if transfers else 0,
        }

    def cache_counts(self) -> dict[str, int]:
        """Persistent-cache lookups: ``found`` graphs were in the cache, ``missing`` ones were new.

        ``missing == 0`` means the compile step produced every graph this run needed. On Neuron a found
        graph loads its NEFF; torch-xla 2.9's PJRT CPU client cannot deserialize executables, so on the
        CPU a found graph is still compiled in-process (``PersistentCacheDeserializeFailure``).
        """
        if not self.is_xla:
            return {"found": 0, "missing": 0}
        import torch_xla.debug.metrics as met

        def counter(name: str) -> int:
            return int(met.counter_value(name) or 0)

        found = counter("PersistentCacheHit") + counter("PersistentCacheDeserializeFailure")
        return {"found": found, "missing": counter("PersistentCacheMiss")}

    def to_cpu(self, value: _T) -> _T:
        """``value`` (a tensor, or a dict or list of them) with its tensors on the host, in the same structure."""
        if self.is_xla:
            import torch_xla.core.xla_model as xm

            # value's structure with its tensors moved (torch_xla annotates it as returning a ToXlaTensorArena)
            return cast(_T, xm._maybe_convert_to_cpu(value))
        return value


def init_compile_cache(runtime_name: str, cache_uri: str | None) -> str | None:
    """Point the XLA persistent compilation cache at ``cache_uri``.

    On Neuron the runtime reads ``NEURON_COMPILE_CACHE_URL`` itself (``s3://`` works). On the CPU,
    torch-xla keeps its own persistent cache in a local directory. Must run before the first XLA call.
    """
    if not cache_uri:
        return None
    if runtime_name == "neuron":
        os.environ["NEURON_COMPILE_CACHE_URL"] = cache_uri
        return cache_uri
    if runtime_name == "xla":
        from trainium_trainer.common.uri import local_path

        path = local_path(cache_uri)
        if path is None:
            raise ValueError(f"the torch-xla CPU cache needs a local directory, got {cache_uri!r}")
        # One directory per local rank: torch-xla's CPU cache has no cross-process locking.
        path = os.path.join(path, f"rank{os.environ.get('LOCAL_RANK', '0')}")
        from trainium_trainer.common.private_dir import ensure_private_dir

        ensure_private_dir(path, what="the torch-xla compile cache")  # its entries are native code it loads
        import torch_xla.runtime as xr

        xr.initialize_cache(path, readonly=False)
        return path
    return None


def init_runtime(cache_uri: str | None = None) -> Runtime:
    name = detect_runtime()
    init_compile_cache(name, cache_uri)
    if name == "eager":
        # transformers and accelerate import torch-xla wherever it is installed (1.2 CPU-s a process on this
        # project's CI machine, torch's inductor and all): an eager run uses none of it. Set before either loads.
        os.environ.setdefault(TRANSFORMERS_USE_XLA, "0")
        return Runtime(name, torch.device("cpu"))
    if name == "neuron":
        import torch_neuronx  # noqa: F401  (registers the Neuron PJRT plugin)
    else:
        os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch_xla

    return Runtime(name, torch_xla.device())


def software_versions() -> dict[str, str]:
    """Versions that decide what a run compiled and computed, for the model's manifest."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {"python": ".".join(map(str, __import__("sys").version_info[:3]))}
    for key, dist in (
        ("torch", "torch"),
        ("torch_xla", "torch-xla"),
        ("torch_neuronx", "torch-neuronx"),
        ("neuronx_cc", "neuronx-cc"),
        ("neuronx_distributed", "neuronx-distributed"),
    ):
        try:
            found[key] = version(dist)
        except PackageNotFoundError:
            continue
    for key, env in (("neuron_sdk", "NEURON_SDK_VERSION"), ("trainer_revision", "TRAINER_REVISION")):
        if os.environ.get(env):
            found[key] = os.environ[env]
    return found
