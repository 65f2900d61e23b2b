"""What each node of a local job gets in its environment, and where its ranks meet.

A node gets the container's environment (the job's plan), the local rendezvous in the neutral contract every
backend maps onto (``TRAINIUM_NUM_NODES``, ``TRAINIUM_NODE_RANK``, the loopback address as
``TRAINIUM_MAIN_ADDR`` and a free port), the device of this machine (``LOCAL_DEVICE_ENV``), and the few
variables of this machine any Python process needs (``INHERITED_NAMES``, ``INHERITED_PREFIXES``) plus those the
``trainium`` connection's ``local_inherited_env`` names. Everything else of the worker's environment stays behind:
AWS keys and Airflow secrets, and what decides which code a process loads (``PYTHONPATH``, ``LD_LIBRARY_PATH``,
``LD_PRELOAD``): a job's code comes from the interpreter's own packages and its code bundle, never from the
worker's variables (docs/security.md, "What a local job inherits").
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from pathlib import Path

from airflow_provider_trainium.neuron.launch import rendezvous_environment
from airflow_provider_trainium.neuron.plan import ContainerPlan
from trainium_trainer import boundary

#: Variables of the worker's environment every local job keeps, each because a Python process (or what it starts)
#: reads it to work at all: ``PATH`` finds ``python``, torchrun and a user's tools; ``HOME``, ``USER`` and
#: ``LOGNAME`` are who runs it (``~`` and the caches under it, ``getpass``); ``LANG``, ``LANGUAGE`` and ``LC_*``
#: its text encoding; ``TMPDIR`` where ``tempfile`` writes; ``TZ`` its clock's zone; ``VIRTUAL_ENV`` the
#: environment whose interpreter runs the job. None of them names code or a library to load.
INHERITED_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TMPDIR", "TZ", "VIRTUAL_ENV"})
INHERITED_PREFIXES = ("LC_",)
#: This machine's device on the XLA stack: local compute runs torch-xla on the CPU (docs/byo.md, "Only on
#: Trainium"), which a training image's Neuron runtime never is. Under the plan's environment: a job's own ``env``
#: may still say otherwise.
LOCAL_DEVICE_ENV: dict[str, dict[str, str]] = {boundary.STACK_XLA: {"PJRT_DEVICE": "CPU"}}
#: Set by local compute on every node; never taken from the worker's environment.
LOCAL_RENDEZVOUS = (
    *boundary.RENDEZVOUS_ENV, boundary.ENV_LEGACY_MAIN_ADDR, boundary.ENV_LEGACY_MAIN_PORT, boundary.ENV_RANK_LOG_DIR,
)  # fmt: skip
LOOPBACK = "127.0.0.1"


def inherited(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether a worker variable ``name`` goes to a local job: built in, or named by one of ``extra`` (the
    connection's ``local_inherited_env``: names, or prefixes ending in ``*``, checked when the connection is read,
    ``hooks.trainium_config.inherited_env_problem``)."""
    if name in INHERITED_NAMES or name.startswith(INHERITED_PREFIXES):
        return True
    return any(name.startswith(entry[:-1]) if entry.endswith("*") else name == entry for entry in extra)


def inherited_environment(environ: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The allowlisted part of this machine's environment a local trainer needs to start at all."""
    extra = tuple(extra)
    return {k: v for k, v in environ.items() if inherited(k, extra) and k not in LOCAL_RENDEZVOUS}


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
    environ: Mapping[str, str],
    plan: ContainerPlan,
    job_name: str,
    index: int,
    port: int,
    rank_logs: Path,
    inherited_env: Iterable[str] = (),
) -> dict[str, str]:
    """The container's environment for node ``index``, plus the local rendezvous and this machine's essentials
    (taken from ``environ``, the worker's environment, by the allowlist and ``inherited_env``)."""
    return {
        **inherited_environment(environ, inherited_env),
        **LOCAL_DEVICE_ENV.get(plan.spec.stack, {}),
        **plan.environment,
        boundary.ENV_JOB_NAME: job_name,
        boundary.ENV_JOB_HASH: plan.spec.content_hash(),
        **rendezvous_environment(plan.spec.nodes, index, LOOPBACK, port),
        boundary.ENV_RANK_LOG_DIR: str(rank_logs),
        # a user's job's working, output, checkpoint and code folders, as /tmp/trainium-job in a container
        boundary.ENV_JOB_DIR: str(work_folder(rank_logs)),
    }
