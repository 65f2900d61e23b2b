"""Deterministic job names and tags from a task instance: a retry finds what an earlier try started."""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
MAX_JOB_NAME = 128  # AWS Batch's limit; ECS startedBy allows 128 too


def safe_part(value: str, limit: int = 40) -> str:
    return _UNSAFE.sub("-", value).strip("-")[:limit] or "x"


def run_key(run_id: str) -> str:
    """A path- and name-safe form of a run id that stays unique (readable prefix + hash)."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:10]
    return f"{safe_part(run_id, 48)}-{digest}"


def job_name(dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> str:
    """``<dag>-<task>[-<map>]-<hash>``; the hash covers all four ids so truncation never collides."""
    digest = hashlib.sha256(f"{dag_id}\0{task_id}\0{run_id}\0{map_index}".encode()).hexdigest()[:12]
    parts = [safe_part(dag_id), safe_part(task_id)]
    if map_index >= 0:
        parts.append(str(map_index))
    parts.append(digest)
    return "-".join(parts)[:MAX_JOB_NAME]


def job_tags(dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> dict[str, str]:
    return {
        "airflow:dag_id": dag_id,
        "airflow:task_id": task_id,
        "airflow:run_id": run_id[:256],
        "airflow:map_index": str(map_index),
    }
