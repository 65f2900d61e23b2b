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
from urllib.parse import unquote

from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID

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


#: Text that no artifact URI holds and that fsspec or a URL parser could read as more than a path: chained file
#: systems (``::``), a query or fragment, backslashes, control characters.
_NOT_IN_ARTIFACT_URIS = ("::", "?", "#", "\\")


def confined(uri: str, root: str) -> str:
    """``uri`` normalized, when it is ``file://`` or ``s3://`` and names ``root`` or a place inside it.

    The one gate for URIs an Airflow user can edit (XComs, rendered fields) before anything opens them: the
    checks read the text only, so a refused URI never reaches a file system and no request is made. Refused
    (:class:`ArtifactURIError`): another scheme (also ``simplecache::``-style chains), a host on ``file://``,
    ``.`` or ``..`` segments (percent-encoded too), empty segments, a query or fragment, another bucket, a
    sibling prefix (``root-other``), and on ``file://`` a path whose symlinks resolve outside the root.
    """
    base = normalize(root)
    if not isinstance(uri, str) or "://" not in uri:
        raise ArtifactURIError(f"refused {uri!r}: not a file:// or s3:// URI")
    scheme, _, rest = uri.partition("://")
    if scheme not in SCHEMES or any(bad in uri for bad in _NOT_IN_ARTIFACT_URIS) or not uri.isprintable():
        raise ArtifactURIError(f"refused {uri!r}: artifacts are plain file:// or s3:// URIs")
    rest = rest.rstrip("/")
    base_scheme, _, base_rest = base.partition("://")
    if scheme != base_scheme:
        raise ArtifactURIError(f"refused {uri!r}: outside the artifact root {base}")
    head, _, path = rest.partition("/")
    if scheme == "file" and head:  # file://host/...: a remote file system
        raise ArtifactURIError(f"refused {uri!r}: a file:// URI names no host")
    segments = path.split("/") if path else []
    for form in (segments, unquote(path).split("/") if path else []):
        if any(seg in ("", ".", "..") for seg in form):
            raise ArtifactURIError(f"refused {uri!r}: empty, . or .. path segments")
    if not _inside(scheme, rest, base_rest.rstrip("/")):
        raise ArtifactURIError(f"refused {uri!r}: outside the artifact root {base}")
    return f"{scheme}://{rest}"


def _inside(scheme: str, rest: str, base_rest: str) -> bool:
    """Whether ``rest`` (``bucket/key`` or ``/path``) is ``base_rest`` or below it, as written and decoded; on
    ``file://`` also once every symlink is resolved."""
    pairs = [(rest, base_rest), (unquote(rest), unquote(base_rest))]
    if scheme == "file":
        pairs.append((os.path.realpath(rest), os.path.realpath(base_rest)))
    return all(r == b or r.startswith(b.rstrip("/") + "/") for r, b in pairs)


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


def get_bytes(path: ObjectStoragePath, max_bytes: int | None = None) -> bytes | None:
    """The object's bytes, or None when it does not exist; with ``max_bytes``, at most ``max_bytes + 1`` of
    them (so a caller that bounds its memory sees that there was more).

    On S3 this is one ``GetObject``: s3fs's file objects would HEAD first and then fail with ``FileExpired``
    when another process replaced the object in between (alias files and job markers do change).
    """
    if path.protocol in ("s3", "s3a", "s3n"):
        return s3_get(path, max_bytes)[0]
    try:
        if max_bytes is None:
            return path.read_bytes()
        with path.open("rb") as stream:
            head: bytes = stream.read(max_bytes + 1)
            return head
    except (FileNotFoundError, IsADirectoryError):
        return None


def s3_get(path: ObjectStoragePath, max_bytes: int | None = None) -> tuple[bytes | None, str | None]:
    """One ``GetObject``: the bytes and ETag, or ``(None, None)`` when the key does not exist; with
    ``max_bytes`` a ranged one (its first ``max_bytes + 1`` bytes)."""
    from fsspec.asyn import sync

    fs = path.fs
    ranged = {} if max_bytes is None else {"Range": f"bytes=0-{max_bytes}"}

    async def _get() -> tuple[bytes | None, str | None]:
        try:
            response = await fs._call_s3("get_object", Bucket=path.bucket, Key=path.key, **ranged)
        except FileNotFoundError:
            return None, None
        async with response["Body"] as stream:
            body = await stream.read()
        return body, response["ETag"]

    got: tuple[bytes | None, str | None] = sync(fs.loop, _get)
    return got


def read_bytes(
    uri: str,
    *,
    missing_ok: bool = False,
    aws_conn_id: str | None = None,
    trainium_conn_id: str = DEFAULT_CONN_ID,
    max_bytes: int | None = None,
) -> bytes | None:
    """The file's bytes; a missing file raises FileNotFoundError, or returns None with ``missing_ok``.

    ``max_bytes`` bounds what is read (see :func:`get_bytes`).
    """
    data = get_bytes(open_path(uri, aws_conn_id=aws_conn_id, trainium_conn_id=trainium_conn_id), max_bytes)
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
