"""The native stack's persistent compile cache: where ``torch.compile`` keeps what it compiled, across runs.

The XLA stack's cache is the Neuron persistent cache (``NEURON_COMPILE_CACHE_URL``, ``s3://`` allowed), filled
by ``neuron_parallel_compile``. The native stack does not use it: TorchNeuron keeps the NEFFs it compiles (eager
and ``torch.compile(backend="neuron")`` alike) in its own persistent NEFF cache, a directory named by
``TORCH_NEURONX_NEFF_CACHE_DIR`` (default ``/tmp/neff_cache``). Sources: Neuron docs, "What are Neuron Compiler
artifacts?" (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/compiler/about-compiler-artifacts.html),
"TorchNeuron environment variables" (.../torch/reference/env-vars.html) and the Neuron Explorer environment
variables and troubleshooting pages (.../tools/neuron-explorer/). On a CPU the same ``--compile`` trial runs
inductor, whose persistent caches (FX graphs, AOTAutograd, kernels) live under ``TORCHINDUCTOR_CACHE_DIR``:
the stand-in the tests here can warm and read back.

Both are directories: no source says TorchNeuron's NEFF cache takes an ``s3://`` URL (a guess that it does not),
so an ``s3://`` cache URI leaves the cache at its node-local default and the run says so.

Must run before the first compilation: both caches read their directory when they first compile.
"""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping
from dataclasses import dataclass

from trainer.common.uri import local_path
from trainer.native.device import COMPILE_BACKENDS, CPU, NEURON

log = logging.getLogger("trainer")

NEFF_CACHE_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
#: The variable that names each device's compile cache directory.
CACHE_ENV = {NEURON: NEFF_CACHE_ENV, CPU: INDUCTOR_CACHE_ENV}
#: Where under the job's compile cache URI each backend's cache goes (beside the XLA stack's files).
CACHE_SUBDIR = {NEURON: "native/neff", CPU: "native/inductor"}


@dataclass(frozen=True)
class CompileCache:
    """Where this run's ``torch.compile`` cache is, for the summary and the compile step's record."""

    backend: str
    directory: str | None
    persistent: bool

    def summary(self) -> dict[str, object]:
        return {"compile_backend": self.backend, "compile_cache_dir": self.directory,
                "compile_cache_persistent": self.persistent}  # fmt: skip


def configure_compile_cache(
    device_type: str, cache_uri: str | None, environ: MutableMapping[str, str] = os.environ
) -> CompileCache:
    """Point the device's compile cache at ``<cache_uri>/native/<neff|inductor>`` when that is a directory."""
    backend, variable = COMPILE_BACKENDS[device_type], CACHE_ENV[device_type]
    path = local_path(cache_uri) if cache_uri else None
    if path is None:
        if cache_uri:
            log.warning("the %s compile cache is a directory; %s is not one, so it stays at %s (this node only)",
                        backend, cache_uri, environ.get(variable, "its default"))  # fmt: skip
        return CompileCache(backend, environ.get(variable), persistent=False)
    directory = os.path.join(path, CACHE_SUBDIR[device_type])
    os.makedirs(directory, exist_ok=True)
    environ[variable] = directory
    return CompileCache(backend, directory, persistent=True)


def inductor_cache_counts() -> dict[str, int]:
    """This process's inductor FX-graph cache lookups (``hit``/``miss``): a warm cache misses nothing."""
    from torch._dynamo.utils import counters

    inductor = counters["inductor"]
    return {"hit": int(inductor["fxgraph_cache_hit"]), "miss": int(inductor["fxgraph_cache_miss"])}
