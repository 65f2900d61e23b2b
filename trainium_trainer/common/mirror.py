"""A node-local mirror of a remote folder (``s3://``): pulled before a tool that only does local file I/O
starts, and what it wrote pushed back after.

Two tools need it: the native stack's compile caches (TorchNeuron's NEFF cache and inductor's are directories)
and TorchTitan's checkpointer (plain file I/O). A file is the same when its size is: both write each file once
under a name that says what it holds. Lock files belong to the processes that made them and are never copied.
Every rank of a node may pull (they take turns under a lock, so the first downloads); one process per node pushes,
so a multi-node job's shards, each written by its own node, all reach the remote folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import tempfile
from collections.abc import Mapping

from trainium_trainer import boundary
from trainium_trainer.common import uri as uris

log = logging.getLogger("trainer")


#: Where a process finds its node's index: torchrun's ``GROUP_RANK`` (its ``--node_rank``) in every rank, else
#: the launcher's contract (``TRAINIUM_NODE_RANK``, which local compute sets) or AWS Batch's own variable.
NODE_INDEX_ENV = ("GROUP_RANK", boundary.ENV_NODE_RANK, "AWS_BATCH_JOB_NODE_INDEX")


def node_index(env: Mapping[str, str] | None = None) -> int:
    """This process's node of its job (0 for a one-node job or outside one)."""
    env = os.environ if env is None else env
    for name in NODE_INDEX_ENV:
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def mirror_directory(remote: str, purpose: str, node: int | None = None) -> str:
    """This node's folder for ``remote``: the same on every run of the node, another for each remote and for each
    node (``node``, default ``node_index()``). Local compute runs a job's nodes on one machine with one temporary
    folder: each node must still mirror alone, as on its own instance, so that what it pushes is what it wrote and
    rank 0's last pull is what gathers the other nodes' shards."""
    key = hashlib.sha256(remote.encode()).hexdigest()[:16]
    node = node_index() if node is None else node
    return os.path.join(tempfile.gettempdir(), f"trainium-{purpose}", f"{key}-node{node}")


def copied(rel: str) -> bool:
    """Lock files belong to the processes that made them, not to the folder."""
    parts = rel.split("/")
    return not rel.endswith(".lock") and "locks" not in parts[:-1]


def local_sizes(directory: str) -> dict[str, int]:
    found = {}
    for folder, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, directory).replace(os.sep, "/")
            if copied(rel):
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
    """Copy the remote folder's files that the mirror lacks; the node's ranks take turns under a lock, so the
    first downloads and the others find everything present. Returns the files the mirror then holds."""
    fs, root = uris.filesystem(remote)
    os.makedirs(directory, exist_ok=True)
    with open(f"{directory}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        have = local_sizes(directory)
        pulled = 0
        for rel, size in sorted(remote_sizes(remote).items()):
            if copied(rel) and have.get(rel) != size:
                target = os.path.join(directory, *rel.split("/"))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                fs.get_file(f"{root.rstrip('/')}/{rel}", target)
                pulled += 1
        if pulled:
            log.info("mirror: pulled %d file(s) from %s", pulled, remote)
        return len(local_sizes(directory))


def push(directory: str, remote: str) -> int:
    """Upload what the mirror has and the remote folder lacks, from one process per node (local rank 0; the
    others return 0). Returns the files uploaded. Raises ``OSError`` when an upload fails."""
    if os.environ.get("LOCAL_RANK", "0") != "0":
        return 0
    fs, root = uris.filesystem(remote)
    local_remote = uris.local_path(remote)  # a folder (tests, a shared file system): parents are made here
    have = remote_sizes(remote)
    pushed = 0
    for rel, size in sorted(local_sizes(directory).items()):
        if have.get(rel) == size:
            continue
        source = os.path.join(directory, rel)
        if local_remote:
            os.makedirs(os.path.dirname(os.path.join(local_remote, rel)), exist_ok=True)
        try:
            fs.put_file(source, f"{root.rstrip('/')}/{rel}")
        except FileNotFoundError:
            if os.path.exists(source):
                raise
            continue  # removed since the walk (a tool pruning its old files): nothing to keep
        pushed += 1
    if pushed:
        log.info("mirror: pushed %d new file(s) from %s to %s", pushed, directory, remote)
    return pushed
