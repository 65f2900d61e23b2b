"""Compile-cache manifests: what the cache held when Airflow last saw a job finish with it, kept where only Airflow
writes, so a job is never started on an entry that changed since.

Compile-cache entries are code a job loads (NEFFs on the XLA stack, inductor's compiled kernels on the native one),
and every job may write every cache (the one job role on AWS; the worker's user on local compute). So after a
compile task's trial the task itself (never the job) lists the cache and records every entry: on ``file://`` the
sha256 of each file, on ``s3://`` each key's size and ETag from one ListObjectsV2 walk through the AWS connection
(nothing downloaded; the ETag changes with every upload of other bytes). The manifest goes to
``<artifact_root>/compile-manifests/<cache id>.json``, a prefix the job role is denied (``cloudformation/base.yaml``),
with the cache keys the compile tasks compiled into it.

Before a job with that cache is submitted, the operator lists the cache again (:func:`verify`): an entry changed or
removed since is refused (a compile trial accepts a removed one: it compiles it again). An entry added since is
allowed and logged: a training run compiles graphs the trial did not (an evaluation step, a last short batch) and
writes them to the cache itself, so nothing here can tell its entries from a planted one. After each job that used
the cache ends, Airflow records the cache again (:func:`refresh`): on local CPU compute torch-xla rewrites every
entry it finds (it cannot load them), so the next job is compared with what the last one left. What remains open
(the time between the check and the job's start, what a job writes while it runs) is in docs/security.md.

A cache no compile task recorded has no manifest: a job still runs with it, with a warning that it is unverified.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_provider_trainium import artifacts

FORMAT = "trainium-compile-manifest/1"
#: Under the artifact root: written by Airflow only (the job role's ``AirflowWritesTheCompileManifests`` Deny).
MANIFESTS_DIR = "compile-manifests"
#: Cache folders that hold no compiled code: the compile tasks' key records (claims, checked against ``keys`` here).
NOT_ENTRIES = ("keys/",)
#: Entries named in an error or a warning before "and N more".
NAMED = 5


class CompileCacheChanged(ValueError):
    """The cache is not what its manifest recorded (a ``ValueError``: the task fails before anything starts)."""


@dataclass(frozen=True)
class CacheChanges:
    """How the cache differs from its manifest, entry names relative to the cache."""

    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()


def cache_id(cache_uri: str) -> str:
    """A name for the cache under the manifests' prefix: one cache, one manifest, whatever its URI's length."""
    return hashlib.sha256(artifacts.normalize(cache_uri).encode()).hexdigest()[:32]


def manifest_uri(artifact_root: str, cache_uri: str) -> str:
    return f"{artifacts.normalize(artifact_root)}/{MANIFESTS_DIR}/{cache_id(cache_uri)}.json"


def list_entries(cache_uri: str, aws_conn_id: str | None = None) -> dict[str, dict[str, Any]]:
    """Every entry of the cache (``NOT_ENTRIES`` aside) by its name relative to the cache."""
    uri = artifacts.normalize(cache_uri)
    found = _s3_entries(uri, aws_conn_id) if uri.startswith("s3://") else _file_entries(uri.removeprefix("file://"))
    return {name: entry for name, entry in found.items() if not name.startswith(NOT_ENTRIES)}


def _file_entries(root: str) -> dict[str, dict[str, Any]]:
    """sha256 and size of each file; a symlink (to a file or a folder, never followed) by its target's text."""
    entries: dict[str, dict[str, Any]] = {}
    for folder, dirs, files in os.walk(root):
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(folder, d)))]:
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            if os.path.islink(path):
                entries[relative] = {"link": os.readlink(path)}
                continue
            try:
                with open(path, "rb") as stream:
                    digest = hashlib.file_digest(stream, "sha256").hexdigest()
                    size = os.fstat(stream.fileno()).st_size
            except FileNotFoundError:  # removed while listed (a lock file): not there
                continue
            entries[relative] = {"sha256": digest, "size": size}
    return entries


def _s3_entries(uri: str, aws_conn_id: str | None) -> dict[str, dict[str, Any]]:
    """Size and ETag of each key under the cache's prefix: one ListObjectsV2 walk through the AWS connection."""
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    prefix = f"{prefix}/" if prefix else ""
    client = S3Hook(aws_conn_id=aws_conn_id or artifacts.aws_conn_id_of()).get_conn()
    entries: dict[str, dict[str, Any]] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", ()):
            entries[item["Key"][len(prefix) :]] = {"size": item["Size"], "etag": item["ETag"].strip('"')}
    return entries


def compare(recorded: Mapping[str, Any], found: Mapping[str, Any]) -> CacheChanges:
    """What changed, went missing and appeared in ``found`` against the ``recorded`` entries."""
    return CacheChanges(
        changed=tuple(sorted(name for name in recorded if name in found and found[name] != recorded[name])),
        removed=tuple(sorted(name for name in recorded if name not in found)),
        added=tuple(sorted(name for name in found if name not in recorded)),
    )


def read_manifest(artifact_root: str, cache_uri: str, aws_conn_id: str | None = None) -> dict[str, Any] | None:
    """The cache's manifest, or None when no compile task recorded one."""
    found = artifacts.read_json(manifest_uri(artifact_root, cache_uri), missing_ok=True, aws_conn_id=aws_conn_id)
    if found is not None and (
        found.get("format") != FORMAT or found.get("cache_uri") != artifacts.normalize(cache_uri)
    ):
        raise CompileCacheChanged(f"the manifest at {manifest_uri(artifact_root, cache_uri)} is not this cache's")
    return found


def record(
    artifact_root: str,
    cache_uri: str,
    recorded_by: Mapping[str, Any],
    *,
    key: str | None = None,
    aws_conn_id: str | None = None,
) -> dict[str, Any]:
    """List the cache and write its manifest, keeping the keys recorded before and adding ``key``; returns it."""
    earlier = read_manifest(artifact_root, cache_uri, aws_conn_id) or {}
    keys = dict(earlier.get("keys") or {})
    now = datetime.now(UTC).isoformat()
    if key is not None:
        keys[key] = {**recorded_by, "created": now}
    manifest = {
        "format": FORMAT,
        "cache_uri": artifacts.normalize(cache_uri),
        "keys": keys,
        "entries": list_entries(cache_uri, aws_conn_id),
        "recorded_by": {**recorded_by, "at": now},
    }
    write_json(manifest_uri(artifact_root, cache_uri), manifest, aws_conn_id)
    return manifest


def write_json(uri: str, value: Mapping[str, Any], aws_conn_id: str | None) -> None:
    """``value`` as indented JSON at ``uri`` (folders made as needed): a manifest, or a compile task's key record."""
    path = artifacts.open_path(uri, aws_conn_id=aws_conn_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, sort_keys=True, default=str))


def refresh(
    artifact_root: str, cache_uri: str, recorded_by: Mapping[str, Any], aws_conn_id: str | None = None
) -> dict[str, Any] | None:
    """Record the cache again after a job with it ended, when a compile task recorded it before; else None."""
    if read_manifest(artifact_root, cache_uri, aws_conn_id) is None:
        return None
    return record(artifact_root, cache_uri, recorded_by, aws_conn_id=aws_conn_id)


def verify(
    artifact_root: str, cache_uri: str, aws_conn_id: str | None = None, *, removed_ok: bool = False
) -> tuple[dict[str, Any] | None, CacheChanges]:
    """The manifest and how the cache differs from it; :class:`CompileCacheChanged` for a changed entry (or a
    removed one, unless ``removed_ok``). No manifest: ``(None, no changes)``."""
    manifest = read_manifest(artifact_root, cache_uri, aws_conn_id)
    if manifest is None:
        return None, CacheChanges()
    changes = compare(manifest.get("entries") or {}, list_entries(cache_uri, aws_conn_id))
    refused = [*changes.changed, *(() if removed_ok else changes.removed)]
    if refused:
        by = manifest.get("recorded_by") or {}
        fix = (
            "Delete the changed entries (or the whole cache), then run the compile task again: a trial reuses any "
            "entry it finds, so rerunning it over a changed one would keep it"
            if changes.changed
            else "Run the compile task again: its trial compiles what is missing"
        )
        raise CompileCacheChanged(
            f"compile cache {artifacts.normalize(cache_uri)}: {describe(changes, removed_ok)} since "
            f"{by.get('dag_id')}/{by.get('run_id')}/{by.get('task_id')} recorded it at {by.get('at')}: a job would "
            f"load compiled code other than what Airflow recorded, or compile it again on paid instances. {fix}"
        )
    return manifest, changes


def describe(changes: CacheChanges, removed_ok: bool = False) -> str:
    """The refused entries, named (``NAMED`` at most per kind)."""
    parts = []
    for kind, names in (("changed", changes.changed), ("removed", () if removed_ok else changes.removed)):
        if names:
            more = f" and {len(names) - NAMED} more" if len(names) > NAMED else ""
            parts.append(
                f"{len(names)} entr{'y' if len(names) == 1 else 'ies'} {kind} ({', '.join(names[:NAMED])}{more})"
            )
    return "; ".join(parts)
