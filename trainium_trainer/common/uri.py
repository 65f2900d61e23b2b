"""Reading and writing artifacts by URI (``file://``, ``s3://`` or a plain path) through fsspec."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem


def join(uri: str, *parts: str) -> str:
    out = uri.rstrip("/")
    for part in parts:
        out = f"{out}/{part.strip('/')}"
    return out


def filesystem(uri: str) -> tuple[fsspec.AbstractFileSystem, str]:
    fs, path = fsspec.core.url_to_fs(uri)
    return fs, path


def exists(uri: str) -> bool:
    fs, path = filesystem(uri)
    found: bool = fs.exists(path)
    return found


def read_bytes(uri: str) -> bytes:
    fs, path = filesystem(uri)
    with fs.open(path, "rb") as fh:
        data: bytes = fh.read()
    return data


def write_bytes(uri: str, data: bytes) -> None:
    """Write so that readers see either nothing or the whole object.

    S3 puts are atomic per object; on a file system the bytes go to a temporary name first.
    """
    fs, path = filesystem(uri)
    parent = path.rsplit("/", 1)[0]
    if isinstance(fs, LocalFileSystem):
        os.makedirs(parent, exist_ok=True)
        tmp = f"{path}.tmp-{uuid.uuid4().hex}"
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return
    with fs.open(path, "wb") as fh:
        fh.write(data)


def read_json(uri: str) -> Any:
    return json.loads(read_bytes(uri))


def json_bytes(value: Any) -> bytes:
    """The bytes ``write_json`` writes for ``value``."""
    return json.dumps(value, indent=2, sort_keys=True).encode()


def write_json(uri: str, value: Any) -> None:
    write_bytes(uri, json_bytes(value))


def write_if_changed(uri: str, data: bytes) -> bool:
    """Write ``data`` unless the object already holds exactly these bytes; whether it wrote."""
    if exists(uri) and read_bytes(uri) == data:
        return False
    write_bytes(uri, data)
    return True


def list_names(uri: str) -> list[str]:
    fs, path = filesystem(uri)
    if not fs.exists(path):
        return []
    return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))


def remove(uri: str, recursive: bool = False) -> None:
    fs, path = filesystem(uri)
    if fs.exists(path):
        fs.rm(path, recursive=recursive)


def local_path(uri: str) -> str | None:
    """The local path of a ``file://`` URI or plain path; ``None`` for remote URIs."""
    if "://" not in uri:
        return uri
    if uri.startswith("file://"):
        return uri[len("file://") :]
    return None
