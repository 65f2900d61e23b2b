"""A job's code bundle: a folder of the user's code, uploaded once under the artifact root by its content hash.

``TrainiumJobOperator(code_dir=...)`` and ``@task.trainium`` (its function and call) ship code this way, as
SageMaker's ``source_dir`` does: the folder goes to ``<artifact_root>/code/<sha256[:16]>/`` and the job's
launcher copies it into the node's code folder (``trainium_trainer.job_dirs``), first on ``PYTHONPATH``. The same bytes
give the same URI, so a retry or a backfill uploads nothing again and the job's spec hash (which names the URI)
changes exactly when the code does. A bundle is complete once its marker is written, last; an upload cut short
is redone. Only the worker (Airflow) writes bundles; a job reads them like any input under the artifact root.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from airflow_provider_trainium.artifacts import get_bytes, normalize, path_for
from trainium_trainer import boundary

#: Written last into a complete bundle.
MARKER = boundary.CODE_BUNDLE_MARKER
#: Folders and suffixes never shipped: caches and version control, not code.
SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".venv"})
SKIPPED_SUFFIXES = (".pyc", ".pyo")
#: A bigger folder belongs in an image (``TrainiumImageBuildOperator(context_dir=...)``), not in every job's start.
MAX_BUNDLE_BYTES = 64 * 1024 * 1024


class CodeBundleError(ValueError):
    """A code folder that cannot be shipped; the message says why and what to do instead."""


def bundle_files(folder: Path) -> Iterator[tuple[str, Path]]:
    """(relative posix path, file) of every file shipped from ``folder``, sorted."""
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part in SKIPPED_DIRS for part in relative.parts) or path.suffix in SKIPPED_SUFFIXES:
            continue
        if path.is_symlink():
            raise CodeBundleError(f"code_dir holds a symlink, {relative}: ship the file itself")
        if path.is_file():
            yield relative.as_posix(), path


def bundle_hash(folder: Path) -> str:
    """The content hash of ``folder``'s shipped files: names and bytes."""
    digest = hashlib.sha256()
    total = 0
    for name, path in bundle_files(folder):
        data = path.read_bytes()
        total += len(data)
        if total > MAX_BUNDLE_BYTES:
            raise CodeBundleError(
                f"code_dir {folder} holds more than {MAX_BUNDLE_BYTES // 2**20} MiB: build an image from it "
                "instead (TrainiumImageBuildOperator(context_dir=...), docs/byo.md)"
            )
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()[:16]


def upload_bundle(folder: str | Path, artifact_root: str, aws_conn_id: str | None) -> str:
    """Upload ``folder`` (unless that content is there already); the bundle's URI."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CodeBundleError(f"code_dir {folder} is not a folder on this worker")
    uri = f"{normalize(artifact_root)}/code/{bundle_hash(folder)}"
    root = path_for(uri, aws_conn_id)
    files = dict(bundle_files(folder))
    if get_bytes(root / MARKER) is not None:
        stored = stored_files(root)
        if stored == {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in files.items()}:
            return uri
        # Its key names this content, so anything else there was changed after the upload: written again, and
        # only the bundle's own files remain (a job runs what the key says, never an added or edited file).
        (root / MARKER).unlink()
        for name in stored.keys() - files.keys():
            (root / name).unlink()
    for name, path in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    (root / MARKER).write_bytes(b"")
    return uri


def stored_files(root: Any) -> dict[str, str]:
    """Name -> sha256 of every file of an uploaded bundle but its marker, read back from the store."""
    from airflow_provider_trainium.registry.hashing import hash_tree

    return {entry.path: entry.sha256 for entry in hash_tree(root) if entry.path != MARKER}
