"""The compile-cache key: what decides whether a cached compilation serves a training run.

The Neuron compiler caches per HLO graph and flags, so a cache filled by a trial with another batch size,
parallel layout or node count does not serve the real run. The key covers exactly those inputs: compiler
version, compiler flags, the trainer and its graph-shaping arguments, instance type, nodes, processes
per node and tensor parallel size. Arguments whose values never reach a graph (data and output
locations, step counts, learning rate, seed) are left out, so a daily fine-tune reuses one compilation.

The native stack (TorchNeuron) compiles per graph and input signature too, into its own NEFF cache
(``TORCH_NEURONX_NEFF_CACHE_DIR``, not the XLA stack's ``NEURON_COMPILE_CACHE_URL``; docs/native.md): its key
adds the stack and the ``torch.compile`` backend (``neuron`` on Trainium; ``inductor`` where local compute runs
on a CPU), and its compiler version is torch with torch-neuronx (the image, on ECS and Batch). The graph-shaping
arguments (model, batch size, sequence length through the data, ``--compile``, ``--precision``) and the layout
are the same inputs as on XLA. XLA keys carry neither field, so caches recorded before the native stack keep
their keys.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_trainium.neuron.launch import job_environment
from airflow_provider_trainium.neuron.spec import JobSpec
from trainium_trainer import boundary

#: Flags whose values do not change the compiled graphs (each takes one value).
NON_GRAPH_ARGS: tuple[str, ...] = (
    "--data-uri",
    "--output-uri",
    "--checkpoint-uri",
    "--compile-cache-uri",
    "--base-model-uri",
    "--max-steps",
    "--lr",
    "--seed",
    "--log-every",
    "--checkpoint-every",
    "--keep-checkpoints",
    "--warmup-steps",
    "--min-lr-ratio",
    "--epochs",
    "--stream-every-s",
    "--progress-every-s",
)
#: Flags without a value that do not change the compiled graphs.
NON_GRAPH_SWITCHES: tuple[str, ...] = ("--compile-only",)
COMPILER_FLAG_VARS: tuple[str, ...] = ("NEURON_CC_FLAGS", "XLA_FLAGS", "NEURON_FUSE_SOFTMAX")
#: ``torch.compile`` backends of the native stack: TorchNeuron's on Trainium, inductor on a CPU.
NATIVE_COMPILE_BACKENDS: tuple[str, ...] = ("neuron", "inductor")


def graph_args(args: Sequence[str], ignore: Sequence[str] = NON_GRAPH_ARGS) -> list[str]:
    """``args`` without the flags (and their values) that never reach a graph."""
    kept: list[str] = []
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
            continue
        name = arg.split("=", 1)[0]
        if name in ignore:
            skip_next = "=" not in arg
            continue
        if name in NON_GRAPH_SWITCHES:
            continue
        kept.append(arg)
    return kept


def key_inputs(
    spec: JobSpec,
    compiler_version: str,
    processes_per_node: int | None = None,
    extra: Mapping[str, Any] | None = None,
    compile_backend: str = "neuron",
) -> dict[str, Any]:
    """What the key covers; ``compile_backend`` counts on the native stack only (``NATIVE_COMPILE_BACKENDS``)."""
    env = job_environment(spec)
    inputs = {
        "compiler_version": compiler_version,
        "compiler_flags": {k: env[k] for k in COMPILER_FLAG_VARS if k in env},
        "entry_point": spec.entry_point,
        "args": graph_args(spec.args),
        "instance_type": spec.instance_type,
        "nodes": spec.nodes,
        "processes_per_node": processes_per_node or spec.nproc_per_node,
        "tensor_parallel_size": spec.tensor_parallel_size,
        "extra": dict(extra or {}),
    }
    if spec.stack == boundary.STACK_NATIVE:
        if compile_backend not in NATIVE_COMPILE_BACKENDS:
            raise ValueError(f"compile backend {compile_backend!r}; allowed: {', '.join(NATIVE_COMPILE_BACKENDS)}")
        inputs |= {"stack": spec.stack, "compile_backend": compile_backend}
    return inputs


def native_compiler_version() -> str:
    """torch (and torch-neuronx, where installed) of this machine, from package metadata: no torch import."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for dist in ("torch", "torch-neuronx"):
        try:
            found.append(f"{dist}=={version(dist)}")
        except PackageNotFoundError:
            continue
    return "+".join(found) or "no-torch"


def local_native_compile_backend() -> str:
    """The backend a local native trial compiles with: ``neuron`` where TorchNeuron is installed, else inductor.

    On an XLA-stack machine torch-neuronx is the PyTorch/XLA plugin, with no ``neuron`` torch.compile backend;
    such a machine runs local native jobs on its CPU. Read from metadata: torch-xla present means the XLA one.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("torch-neuronx")
    except PackageNotFoundError:
        return "inductor"
    try:
        version("torch-xla")
    except PackageNotFoundError:
        return "neuron"
    return "inductor"


def cache_key(inputs: Mapping[str, Any]) -> str:
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def key_record_uri(compile_cache_uri: str, key: str) -> str:
    """Where the record of a finished compilation lives, next to the cache it filled."""
    return f"{compile_cache_uri.rstrip('/')}/keys/{key}.json"
