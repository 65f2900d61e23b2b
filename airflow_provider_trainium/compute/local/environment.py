"""What each node of a local job gets in its environment, and where its ranks meet.

A node gets the container's environment (the job's plan), the local rendezvous in the neutral contract every
backend maps onto (``TRAINIUM_NUM_NODES``, ``TRAINIUM_NODE_RANK``, the loopback address as
``TRAINIUM_MAIN_ADDR`` and a free port), and the few variables of this machine a Python process needs
(``INHERITED_NAMES``, ``INHERITED_PREFIXES``). The worker's other variables (AWS keys, Airflow secrets) stay
behind: the allowlist is what keeps them out of a job.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from pathlib import Path

from airflow_provider_trainium.neuron.launch import rendezvous_environment
from airflow_provider_trainium.neuron.plan import ContainerPlan
from trainium_trainer import boundary

#: Variables of the worker's environment a local trainer keeps; everything else is left behind.
INHERITED_NAMES = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TZ", "LANG", "LANGUAGE",
        "PYTHONPATH", "PYTHONHASHSEED", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
        "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM",
    }
)  # fmt: skip
INHERITED_PREFIXES = ("LC_", "PJRT_", "XLA_", "TPU_", "NEURON_", boundary.ENV_PREFIX, "OMP_", "MKL_")
#: Set by local compute on every node; never taken from the worker's environment.
LOCAL_RENDEZVOUS = (
    *boundary.RENDEZVOUS_ENV, boundary.ENV_LEGACY_MAIN_ADDR, boundary.ENV_LEGACY_MAIN_PORT, boundary.ENV_RANK_LOG_DIR,
)  # fmt: skip
LOOPBACK = "127.0.0.1"


def inherited_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted part of this machine's environment a local trainer needs to start at all."""
    return {
        k: v
        for k, v in environ.items()
        if (k in INHERITED_NAMES or k.startswith(INHERITED_PREFIXES)) and k not in LOCAL_RENDEZVOUS
    }


def work_folder(rank_logs: Path) -> Path:
    """A node's working folder (``node<i>-job``, beside its rank logs ``node<i>``): its copies of the job's code,
    outputs and checkpoints, which the launcher uploads to their URIs."""
    return rank_logs.with_name(f"{rank_logs.name}-job")


def free_port() -> int:
    """A port nothing listens on now: the job's main rank listens there for the others."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]  # an AF_INET address: (host, port)
        return port


def node_environment(
    environ: Mapping[str, str], plan: ContainerPlan, job_name: str, index: int, port: int, rank_logs: Path
) -> dict[str, str]:
    """The container's environment for node ``index``, plus the local rendezvous and this machine's essentials
    (taken from ``environ``, the worker's environment)."""
    return {
        **inherited_environment(environ),
        **plan.environment,
        boundary.ENV_JOB_NAME: job_name,
        boundary.ENV_JOB_HASH: plan.spec.content_hash(),
        **rendezvous_environment(plan.spec.nodes, index, LOOPBACK, port),
        boundary.ENV_RANK_LOG_DIR: str(rank_logs),
        # a user's job's working, output, checkpoint and code folders, as /tmp/trainium-job in a container
        boundary.ENV_JOB_DIR: str(work_folder(rank_logs)),
    }
