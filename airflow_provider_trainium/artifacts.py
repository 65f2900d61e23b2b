"""Open artifact URIs (``file://``, ``s3://``, plain paths) the one way the provider does.

Every reader of artifacts (operators, sensors, DAG task bodies, the model registry, the UI plugin) comes
through here, so ``s3://`` is always reached with the ``trainium`` connection's ``aws_conn_id`` (and, through
that AWS connection, its ``endpoint_url``), never with whatever default credentials the worker happens to have.
Built on Airflow's ``ObjectStoragePath`` (s3fs underneath); imported lazily so DAG files stay light.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Literal

from airflow_provider_trainium.hooks.trainium import DEFAULT_CONN_ID

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath

#: The schemes artifacts may live on: local files (laptop, CI) and S3 (ECS, Batch).
SCHEMES = ("file", "s3")


class ArtifactURIError(ValueError):
    """A URI on a scheme the provider does not read artifacts from."""


def normalize(uri: str) -> str:
    """``file://`` URI for a plain path; any other URI unchanged (without a trailing slash)."""
    if "://" not in uri:
        uri = "file://" + os.path.abspath(uri)
    scheme = uri.split("://", 1)[0]
    if scheme not in SCHEMES:
        raise ArtifactURIError(f"unsupported URI {uri!r}: artifacts live on {', '.join(s + '://' for s in SCHEMES)}")
    return uri if uri.endswith("://") else uri.rstrip("/")


def is_remote(uri: str) -> bool:
    return normalize(uri).startswith("s3://")


def aws_conn_id_of(trainium_conn_id: str = DEFAULT_CONN_ID) -> str:
    """The AWS connection the ``trainium`` connection names (``aws_default`` without one)."""
    from airflow_provider_trainium.hooks.trainium import TrainiumHook

    return TrainiumHook(trainium_conn_id).get_config().aws_conn_id


def path_for(uri: str, conn_id: str | None) -> ObjectStoragePath:
    """An ObjectStoragePath for ``uri``; ``s3://`` through the AWS connection ``conn_id`` (local: none)."""
    from airflow.sdk import ObjectStoragePath

    uri = normalize(uri)
    return ObjectStoragePath(uri, conn_id=conn_id if uri.startswith("s3://") else None)


def open_path(
    uri: str, *, aws_conn_id: str | None = None, trainium_conn_id: str = DEFAULT_CONN_ID
) -> ObjectStoragePath:
    """The path for ``uri``; S3 through ``aws_conn_id`` when given, else the trainium connection's."""
    if aws_conn_id is None and is_remote(uri):
        aws_conn_id = aws_conn_id_of(trainium_conn_id)
    return path_for(uri, aws_conn_id)


def get_bytes(path: ObjectStoragePath) -> bytes | None:
    """The object's bytes, or None when it does not exist.

    On S3 this is one ``GetObject``: s3fs's file objects would HEAD first and then fail with ``FileExpired``
    when another process replaced the object in between (alias files and job markers do change).
    """
    if path.protocol in ("s3", "s3a", "s3n"):
        return s3_get(path)[0]
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None


def s3_get(path: ObjectStoragePath) -> tuple[bytes | None, str | None]:
    """One ``GetObject``: the bytes and ETag, or ``(None, None)`` when the key does not exist."""
    from fsspec.asyn import sync

    fs = path.fs

    async def _get() -> tuple[bytes | None, str | None]:
        try:
            response = await fs._call_s3("get_object", Bucket=path.bucket, Key=path.key)
        except FileNotFoundError:
            return None, None
        async with response["Body"] as stream:
            body = await stream.read()
        return body, response["ETag"]

    return sync(fs.loop, _get)


def read_bytes(
    uri: str, *, missing_ok: bool = False, aws_conn_id: str | None = None, trainium_conn_id: str = DEFAULT_CONN_ID
) -> bytes | None:
    """The file's bytes; a missing file raises FileNotFoundError, or returns None with ``missing_ok``."""
    data = get_bytes(open_path(uri, aws_conn_id=aws_conn_id, trainium_conn_id=trainium_conn_id))
    if data is None and not missing_ok:
        raise FileNotFoundError(f"no artifact at {normalize(uri)}")
    return data


def read_json(
    uri: str, *, missing_ok: bool = False, aws_conn_id: str | None = None, trainium_conn_id: str = DEFAULT_CONN_ID
) -> Any:
    """The file's JSON; a missing file raises FileNotFoundError, or returns None with ``missing_ok``."""
    data = read_bytes(uri, missing_ok=missing_ok, aws_conn_id=aws_conn_id, trainium_conn_id=trainium_conn_id)
    return None if data is None else json.loads(data)


def exists(uri: str, *, aws_conn_id: str | None = None, trainium_conn_id: str = DEFAULT_CONN_ID) -> bool:
    """Whether a file or a folder (an S3 prefix with objects under it) is at ``uri``."""
    path = open_path(uri, aws_conn_id=aws_conn_id, trainium_conn_id=trainium_conn_id)
    _forget_listing(path)
    return path.exists()


def list_uris(
    uri: str,
    *,
    kind: Literal["file", "dir"] | None = None,
    aws_conn_id: str | None = None,
    trainium_conn_id: str = DEFAULT_CONN_ID,
) -> list[str]:
    """The URIs directly under the folder ``uri``, sorted; empty when it does not exist.

    ``kind`` keeps only files or only folders (S3 prefixes with objects under them).
    """
    base = normalize(uri)
    path = open_path(base, aws_conn_id=aws_conn_id, trainium_conn_id=trainium_conn_id)
    _forget_listing(path)
    if not path.exists():
        return []
    children = list(path.iterdir())
    if kind is not None:
        children = [c for c in children if (c.is_dir() if kind == "dir" else c.is_file())]
    return sorted(f"{base}/{child.name}" for child in children)


def _forget_listing(path: ObjectStoragePath) -> None:
    """s3fs caches listings per process; artifacts are written by other processes, so ask S3 again."""
    invalidate = getattr(path.fs, "invalidate_cache", None)
    if invalidate is not None and path.protocol not in ("", "file", "local"):
        invalidate(path.path)
