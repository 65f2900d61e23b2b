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

Both are directories: no source says TorchNeuron's NEFF cache takes an ``s3://`` URL (a guess that it does not).
So for an ``s3://`` cache URI (the cache of every ECS/Batch job) each node keeps a local mirror
(``common/mirror.py``): pulled from the URI before the first compilation, and what the run added pushed back at
its end (:meth:`CompileCache.push`, one process per node). A rerun on a fresh instance then starts warm, which is what
the compile step's key record promises.

Must run before the first compilation: both caches read their directory when they first compile.
"""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping
from dataclasses import dataclass

from trainium_trainer.common import mirror
from trainium_trainer.common import uri as uris
from trainium_trainer.common.uri import local_path
from trainium_trainer.native.device import COMPILE_BACKENDS, CPU, NEURON

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
    #: the remote cache this node mirrors (``s3://...``), or None for a local or no cache
    remote: str | None = None
    #: files this node's mirror held once pulled (whichever of the node's ranks downloaded them)
    files_at_start: int = 0

    def summary(self) -> dict[str, object]:
        return {
            "compile_backend": self.backend,
            "compile_cache_dir": self.remote or self.directory,
            "compile_cache_persistent": self.persistent,
            "compile_cache_files_at_start": self.files_at_start,
        }

    def push(self) -> int:
        """Upload what this node's mirror has and the remote cache lacks; one process per node does it
        (local rank 0, after every rank of the node has compiled). Returns the files uploaded."""
        if self.remote is None or self.directory is None:
            return 0
        try:
            return mirror.push(self.directory, self.remote)
        except OSError as err:  # the run's outputs are written: a cold cache next time is no reason to fail it
            log.warning("compile cache: pushing to %s failed: %s", self.remote, err)
            return 0


def configure_compile_cache(
    device_type: str, cache_uri: str | None, environ: MutableMapping[str, str] = os.environ
) -> CompileCache:
    """Point the device's compile cache at ``<cache_uri>/native/<neff|inductor>`` when that is a directory."""
    backend, variable = COMPILE_BACKENDS[device_type], CACHE_ENV[device_type]
    path = local_path(cache_uri) if cache_uri else None
    if path is None:
        if not cache_uri:
            return CompileCache(backend, environ.get(variable), persistent=False)
        remote = uris.join(cache_uri, CACHE_SUBDIR[device_type])
        directory = mirror.mirror_directory(remote, "compile-cache")
        held = mirror.pull(remote, directory)
        environ[variable] = directory
        log.info("compile cache: %s mirrored at %s (%d file(s))", remote, directory, held)
        return CompileCache(backend, directory, persistent=True, remote=remote, files_at_start=held)
    directory = os.path.join(path, CACHE_SUBDIR[device_type])
    os.makedirs(directory, exist_ok=True)
    environ[variable] = directory
    return CompileCache(backend, directory, persistent=True)


def inductor_cache_counts() -> dict[str, int]:
    """This process's inductor FX-graph cache lookups (``hit``/``miss``): a warm cache misses nothing."""
    from torch._dynamo.utils import counters

    inductor = counters["inductor"]
    return {"hit": int(inductor["fxgraph_cache_hit"]), "miss": int(inductor["fxgraph_cache_miss"])}
