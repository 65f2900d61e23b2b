"""The few storage primitives the registry needs, over Airflow's ``ObjectStoragePath``.

Everything is plain reads and writes through ObjectStoragePath except three operations whose atomicity
matters, and those have one branch per backend:

* ``create`` (exclusive create): S3 ``PutObject`` with ``If-None-Match: *`` (s3fs mode ``xb``);
  file:// writes a temporary file and ``link()``s it into place, which fails if the name exists, so a
  reader never sees a half-written file.
* ``write`` (replace): S3 puts are atomic per object; file:// writes a temporary file and ``rename()``s it.
* ``swap`` (compare-and-swap): S3 ``PutObject`` with ``If-Match: <etag>``; file:// holds an ``flock`` on a
  side lock file while it compares the current bytes and renames the new file over them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

from airflow.sdk import ObjectStoragePath

from airflow_provider_trainium import artifacts

SCHEMES = artifacts.SCHEMES
#: How often a writer that lost a race (an exclusive create, a swap) tries again before giving up as contention.
MAX_ATTEMPTS = 100


def open_root(uri: str, conn_id: str | None = None) -> ObjectStoragePath:
    """An ObjectStoragePath for a root URI (plain paths become ``file://`` URIs), opened as every artifact is."""
    try:
        return artifacts.path_for(uri, conn_id)
    except artifacts.ArtifactURIError as err:
        raise ValueError(str(err).replace("artifacts live on", "the registry works on")) from err


def is_local(path: ObjectStoragePath) -> bool:
    return path.protocol in ("", "file", "local")


def uri_of(path: ObjectStoragePath) -> str:
    """The URI users see and manifests record: no connection id in it (``s3://bucket/key``)."""
    protocol = path.protocol or "file"
    body = path.path
    if protocol == "file":
        return "file://" + body
    return f"{protocol}://{body.lstrip('/')}"


def read_bytes(path: ObjectStoragePath) -> bytes | None:
    """The object's bytes, or None when it does not exist (one ``GetObject`` on S3)."""
    return artifacts.get_bytes(path)


def read_json(path: ObjectStoragePath) -> Any | None:
    data = read_bytes(path)
    return None if data is None else json.loads(data)


def dump_json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, default=str) + "\n").encode()


def jsonable(value: Any) -> Any:
    """Caller-given values (params, who moved an alias) as JSON: round-trip through json (dates and other
    objects become strings), so what is stored is what a reader gets back."""
    return json.loads(json.dumps(dict(value) if hasattr(value, "keys") else value, default=str))


@contextlib.contextmanager
def _local_tmp(path: ObjectStoragePath, data: bytes) -> Iterator[str]:
    """A fully written, fsynced temporary file next to ``path``; removed afterwards if still there."""
    target = path.path
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = f"{target}.tmp-{uuid.uuid4().hex}"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    try:
        yield tmp
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def create(path: ObjectStoragePath, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists. True when this call created it."""
    if is_local(path):
        with _local_tmp(path, data) as tmp:
            try:
                os.link(tmp, path.path)
            except FileExistsError:
                return False
        return True
    for _ in range(5):
        try:
            with path.open("xb") as fh:
                fh.write(data)
        except FileExistsError:
            return False
        except OSError as exc:
            # 409 ConditionalRequestConflict: another conditional write to this key is in flight.
            if not _lost_race(exc):
                raise
            if path.exists():
                return False
            continue
        return True
    return False


def write(path: ObjectStoragePath, data: bytes) -> None:
    """Replace ``path`` so that readers see the old or the new bytes, never a mix."""
    if is_local(path):
        with _local_tmp(path, data) as tmp:
            os.replace(tmp, path.path)
        return
    path.write_bytes(data)


def _local_token(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def read_for_swap(path: ObjectStoragePath) -> tuple[bytes | None, str | None]:
    """Current bytes and the token that a following ``swap`` must match.

    On S3 the ETag must belong to the very bytes returned, so both come from one ``GetObject``.
    """
    if _is_s3(path):
        return _s3_get(path)
    data = read_bytes(path)
    return data, _local_token(data)


def _is_s3(path: ObjectStoragePath) -> bool:
    return path.protocol in ("s3", "s3a", "s3n")


def _s3_get(path: ObjectStoragePath) -> tuple[bytes | None, str | None]:
    return artifacts.s3_get(path)


def swap(path: ObjectStoragePath, data: bytes, expected: str | None) -> bool:
    """Write ``data`` only if ``path`` still matches ``expected`` (None: only if it does not exist)."""
    if expected is None:
        return create(path, data)
    if is_local(path):
        with open(f"{path.path}.lock", "a+b") as lock_fh:
            fcntl.flock(lock_fh, fcntl.LOCK_EX)
            try:
                if _local_token(read_bytes(path)) != expected:
                    return False
                write(path, data)
                return True
            finally:
                fcntl.flock(lock_fh, fcntl.LOCK_UN)
    try:
        path.fs.call_s3("put_object", Bucket=path.bucket, Key=path.key, Body=data, IfMatch=expected)
    except OSError as exc:
        if _lost_race(exc):
            return False
        raise
    path.fs.invalidate_cache(path.path)
    return True


def _lost_race(exc: BaseException) -> bool:
    """412 PreconditionFailed (someone wrote first), 409 ConditionalRequestConflict, or the key vanished."""
    if isinstance(exc, FileNotFoundError):
        return True
    cause = getattr(exc, "__cause__", None)
    response = getattr(cause, "response", None) or {}
    return response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict")


def refresh(path: ObjectStoragePath) -> None:
    """Forget cached listings at and under ``path`` (and its parents).

    s3fs caches directory listings per process and answers ``exists``/``info`` from them; other
    processes register versions and move aliases, so every registry read starts from S3 itself.
    """
    fs = path.fs
    cache = getattr(fs, "dircache", None)
    if not cache:
        return
    prefix = fs._strip_protocol(path.path).rstrip("/")
    for key in list(cache):
        if key == prefix or key.startswith(prefix + "/"):
            cache.pop(key, None)
    fs.invalidate_cache(prefix)
