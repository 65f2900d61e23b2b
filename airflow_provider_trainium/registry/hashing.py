"""Content hashes: each file's sha256, a model's fingerprint, a dataset's content hash."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from airflow.sdk import ObjectStoragePath

from trainium_trainer import boundary


@dataclass(frozen=True)
class FileEntry:
    """One file of a model version, relative to the version's ``files/`` directory."""

    path: str
    size: int
    sha256: str

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


def walk_files(root: ObjectStoragePath) -> list[tuple[str, ObjectStoragePath]]:
    """Every file under ``root`` as (relative posix path, path), sorted; a file root lists itself."""
    if root.is_file():
        return [(root.name, root)]
    if not root.is_dir():
        raise FileNotFoundError(f"{root} does not exist")
    found = []
    base = root.path.rstrip("/") + "/"
    # fsspec's find, not Path.walk: ObjectStoragePath has no walk() on Airflow 3.0 (universal-pathlib 0.2)
    for full in root.fs.find(root.path):
        rel = full[len(base) :] if full.startswith(base) else full.rsplit("/", 1)[-1]
        found.append((rel, root / rel))
    return sorted(found, key=lambda item: item[0])


def sha256_stream(path: ObjectStoragePath, sink: Callable[[bytes], object] | None = None) -> tuple[int, str]:
    """Size and sha256 of a file, read once in chunks; each chunk also goes to ``sink`` if given."""
    with path.open("rb") as fh:
        return boundary.sha256_read(fh, sink)


#: What a run writes about itself next to its model (the live metrics stream, log cursors): not the model.
RUN_BOOKKEEPING = ("stream/", ".trainium/")


def hash_tree(root: ObjectStoragePath, skip: tuple[str, ...] = ()) -> list[FileEntry]:
    """Path, size and sha256 of every file under ``root``, except those under the ``skip`` prefixes."""
    entries = []
    for rel, path in walk_files(root):
        if rel.startswith(skip):
            continue
        size, sha = sha256_stream(path)
        entries.append(FileEntry(rel, size, sha))
    return entries


def fingerprint(entries: list[FileEntry]) -> str:
    """Identity of a model's content: same files with the same bytes give the same fingerprint."""
    digest = hashlib.sha256()
    for entry in sorted(entries, key=lambda e: e.path):
        digest.update(f"{entry.path}\0{entry.size}\0{entry.sha256}\n".encode())
    return digest.hexdigest()


def dataset_hash(root: ObjectStoragePath, max_bytes: int) -> dict[str, object]:
    """A dataset's content hash: sha256 over its files' sha256 when the dataset is at most ``max_bytes``.

    Larger datasets are identified by their listing (path, size, ETag or mtime) instead, which is cheap
    and still changes when any file is rewritten; ``method`` says which one was used.
    """
    files = walk_files(root)
    sizes = {rel: path.stat().get("size", 0) for rel, path in files}
    total = sum(int(s or 0) for s in sizes.values())
    digest = hashlib.sha256()
    if total <= max_bytes:
        method = "sha256-of-files"
        for rel, path in files:
            size, sha = sha256_stream(path)
            digest.update(f"{rel}\0{size}\0{sha}\n".encode())
    else:
        method = "listing"
        for rel, path in files:
            info = path.stat()
            stamp = info.get("ETag") or info.get("mtime") or info.get("LastModified") or ""
            digest.update(f"{rel}\0{sizes[rel]}\0{stamp}\n".encode())
    return {"sha256": digest.hexdigest(), "method": method, "files": len(files), "bytes": total}
