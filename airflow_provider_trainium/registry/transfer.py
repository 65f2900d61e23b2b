"""Copying one file of a version and proving the bytes that arrived are the bytes that were hashed.

Registering uploads a model's files after hashing them, and downloading copies a version's files out; in both
the source can change (or be swapped) in between. Each copy hashes what it streams and refuses a mismatch
before the target becomes visible: a local file is written aside and renamed into place, an S3 upload is
dropped before it completes.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from airflow.sdk import ObjectStoragePath

from airflow_provider_trainium.registry import store
from airflow_provider_trainium.registry.errors import SourceChangedError
from airflow_provider_trainium.registry.hashing import FileEntry, sha256_stream


def same_content(path: ObjectStoragePath, entry: FileEntry) -> bool:
    """Does ``path`` hold exactly ``entry``'s bytes? Sizes alone are not enough: a same-size file could be
    planted in a version being registered."""
    try:
        if int(path.stat()["size"]) != entry.size:
            return False
        return sha256_stream(path) == (entry.size, entry.sha256)
    except FileNotFoundError:
        return False


def copy_verified(src: ObjectStoragePath, dst: ObjectStoragePath, entry: FileEntry) -> None:
    """Stream ``src`` to ``dst`` and check the bytes still hash to what was hashed before."""
    if store.is_local(dst):
        os.makedirs(os.path.dirname(dst.path), exist_ok=True)
        tmp = f"{dst.path}.tmp-{uuid.uuid4().hex}"
        try:
            with open(tmp, "wb") as out:
                size, sha = sha256_stream(src, out.write)
                out.flush()
                os.fsync(out.fileno())
            _check(src, entry, size, sha)
            os.replace(tmp, dst.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return
    with dst.open("wb") as out:
        size, sha = sha256_stream(src, out.write)
        try:
            _check(src, entry, size, sha)
        except SourceChangedError:
            _abort_upload(out)
            raise


def _abort_upload(fh: Any) -> None:
    """Drop an S3 upload before it completes, so no object with the wrong bytes appears."""
    fh = getattr(fh, "_obj", fh)  # ObjectStoragePath wraps the fsspec file
    discard = getattr(fh, "discard", None)
    if callable(discard):
        discard()
        fh.closed = True  # s3fs's discard leaves no buffer: closing it would try to upload again


def _check(src: ObjectStoragePath, entry: FileEntry, size: int, sha: str) -> None:
    if (size, sha) != (entry.size, entry.sha256):
        raise SourceChangedError(f"{store.uri_of(src)} changed while it was being registered; try again")
