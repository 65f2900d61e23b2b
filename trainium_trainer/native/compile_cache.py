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
So for an ``s3://`` cache URI (the cache of every ECS/Batch job) each node keeps a local mirror: pulled from
the URI before the first compilation, and what the run added pushed back at its end
(:meth:`CompileCache.push`, one process per node). A rerun on a fresh instance then starts warm, which is what
the compile step's key record promises.

Must run before the first compilation: both caches read their directory when they first compile.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import tempfile
from collections.abc import MutableMapping
from dataclasses import dataclass

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
        if self.remote is None or self.directory is None or os.environ.get("LOCAL_RANK", "0") != "0":
            return 0
        fs, root = uris.filesystem(self.remote)
        pushed = 0
        try:
            have = remote_sizes(self.remote)
            for rel, size in sorted(local_sizes(self.directory).items()):
                if have.get(rel) != size:
                    fs.put_file(os.path.join(self.directory, rel), f"{root.rstrip('/')}/{rel}")
                    pushed += 1
        except OSError as err:  # the run's outputs are written: a cold cache next time is no reason to fail it
            log.warning("compile cache: pushing to %s stopped after %d file(s): %s", self.remote, pushed, err)
            return pushed
        log.info("compile cache: pushed %d new file(s) from %s to %s", pushed, self.directory, self.remote)
        return pushed


def cacheable(rel: str) -> bool:
    """Lock files belong to the processes that made them, not to the cache."""
    parts = rel.split("/")
    return not rel.endswith(".lock") and "locks" not in parts[:-1]


def local_sizes(directory: str) -> dict[str, int]:
    found = {}
    for folder, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, directory).replace(os.sep, "/")
            if cacheable(rel):
                found[rel] = os.path.getsize(path)
    return found


def remote_sizes(remote: str) -> dict[str, int]:
    fs, root = uris.filesystem(remote)
    root = root.rstrip("/")
    if not fs.exists(root):
        return {}
    return {path[len(root) :].lstrip("/"): int(info.get("size") or 0)
            for path, info in fs.find(root, detail=True).items()}  # fmt: skip


def pull(remote: str, directory: str) -> int:
    """Copy the remote cache's files that this node's mirror lacks; the node's ranks take turns under a lock,
    so the first downloads and the others find everything present. Returns the files the mirror then holds."""
    fs, root = uris.filesystem(remote)
    os.makedirs(directory, exist_ok=True)
    with open(f"{directory}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        have = local_sizes(directory)
        pulled = 0
        for rel, size in sorted(remote_sizes(remote).items()):
            if cacheable(rel) and have.get(rel) != size:
                target = os.path.join(directory, *rel.split("/"))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                fs.get_file(f"{root.rstrip('/')}/{rel}", target)
                pulled += 1
        if pulled:
            log.info("compile cache: pulled %d file(s) from %s", pulled, remote)
        return len(local_sizes(directory))


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
        mirror = os.path.join(tempfile.gettempdir(), "trainium-compile-cache",
                              hashlib.sha256(remote.encode()).hexdigest()[:16])  # fmt: skip
        held = pull(remote, mirror)
        environ[variable] = mirror
        log.info("compile cache: %s mirrored at %s (%d file(s))", remote, mirror, held)
        return CompileCache(backend, mirror, persistent=True, remote=remote, files_at_start=held)
    directory = os.path.join(path, CACHE_SUBDIR[device_type])
    os.makedirs(directory, exist_ok=True)
    environ[variable] = directory
    return CompileCache(backend, directory, persistent=True)


def inductor_cache_counts() -> dict[str, int]:
    """This process's inductor FX-graph cache lookups (``hit``/``miss``): a warm cache misses nothing."""
    from torch._dynamo.utils import counters

    inductor = counters["inductor"]
    return {"hit": int(inductor["fxgraph_cache_hit"]), "miss": int(inductor["fxgraph_cache_miss"])}
