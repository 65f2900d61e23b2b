"""The build context: the Dockerfile plus exactly the files it reads, hashed into the image tag.

The hash covers each file's relative path, type, normalised mode (0755 if any execute bit, else 0644) and
content; it ignores mtimes, owners and the order files are found in, so every worker that checks out the same
sources computes the same tag. Builders get a staged copy holding only the hashed files, so what is built is
what was hashed.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from airflow_provider_trainium.image.dockerfile import context_sources
from airflow_provider_trainium.image.errors import ContextError
from airflow_provider_trainium.image.ignore import GLOB_CHARS, IgnoreRules, glob_to_regex, matches_or_parent

HASH_VERSION = "trainium-image-context/1"
_TAG_PREFIX = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_CHUNK = 1 << 20
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True, order=True)
class Entry:
    """One context path: ``kind`` is file, link or dir; ``digest`` hashes the content or link target."""

    path: str
    kind: str
    mode: int
    digest: str


def _file_digest(path: Path, rel: str) -> str:
    try:
        with path.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as exc:
        raise ContextError(f"cannot read build context file {rel!r}: {exc.strerror or exc}") from None


def _entry(root: Path, rel: str) -> Entry:
    path = root / rel
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise ContextError(f"cannot read build context path {rel!r}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        return Entry(rel, "link", 0o777, hashlib.sha256(target.encode()).hexdigest())
    if stat.S_ISDIR(st.st_mode):
        return Entry(rel, "dir", 0o755, "")
    if stat.S_ISREG(st.st_mode):
        mode = 0o755 if st.st_mode & 0o111 else 0o644
        return Entry(rel, "file", mode, _file_digest(path, rel))
    kind = "socket" if stat.S_ISSOCK(st.st_mode) else "fifo" if stat.S_ISFIFO(st.st_mode) else "device"
    raise ContextError(f"build context path {rel!r} is a {kind}; only files, directories and symlinks can be copied")


@dataclass(frozen=True)
class BuildContext:
    """A context directory, its Dockerfile and the entries the Dockerfile reads, ready to hash or stage."""

    root: Path
    dockerfile: str
    entries: tuple[Entry, ...]
    build_args: dict[str, str] = field(default_factory=dict)
    target: str | None = None

    @classmethod
    def load(
        cls,
        root: str | os.PathLike[str],
        dockerfile: str = "Dockerfile",
        build_args: dict[str, str] | None = None,
        target: str | None = None,
    ) -> BuildContext:
        """Read the Dockerfile and collect what it copies; every problem is a ContextError, raised now."""
        root_path = Path(root).resolve()
        if not root_path.is_dir():
            raise ContextError(f"build context {str(root)!r} is not a directory")
        df_path = Path(dockerfile)
        df_path = (df_path if df_path.is_absolute() else root_path / df_path).resolve()
        if not df_path.is_relative_to(root_path):
            raise ContextError(f"Dockerfile {dockerfile!r} must lie inside the build context {str(root_path)!r}")
        if not df_path.is_file():
            raise ContextError(f"Dockerfile not found: {str(df_path)!r}")
        try:
            text = df_path.read_text(encoding="utf-8")
            rules = IgnoreRules.from_context(root_path)
        except (OSError, UnicodeDecodeError) as exc:
            raise ContextError(f"cannot read {str(df_path)!r} or .dockerignore: {exc}") from None
        args = {str(k): str(v) for k, v in (build_args or {}).items()}
        df_rel = df_path.relative_to(root_path).as_posix()
        collector = _Collector(root_path, rules)
        collector.add(df_rel, force=True)
        for source in context_sources(text, args):
            collector.add_source(source)
        return cls(root_path, df_rel, tuple(sorted(collector.entries.values())), args, target)

    @property
    def digest(self) -> str:
        """sha256 over the Dockerfile path, build args, target and every entry, in path order."""
        h = hashlib.sha256()
        h.update(f"{HASH_VERSION}\ndockerfile {json.dumps(self.dockerfile)}\n".encode())
        for name, value in sorted(self.build_args.items()):
            h.update(f"arg {json.dumps(name)} {json.dumps(value)}\n".encode())
        if self.target:
            h.update(f"target {json.dumps(self.target)}\n".encode())
        for e in self.entries:
            h.update(f"{e.kind} {e.mode:o} {e.digest} {json.dumps(e.path)}\n".encode())
        return h.hexdigest()

    def tag(self, prefix: str = "ctx") -> str:
        if not _TAG_PREFIX.match(prefix):
            raise ContextError(f"tag prefix {prefix!r} must match {_TAG_PREFIX.pattern}")
        return f"{prefix}-{self.digest[:32]}"

    def stage(self, dest: str | os.PathLike[str]) -> StagedContext:
        """Copy exactly the hashed entries into ``dest``; fails if a file changed since it was hashed."""
        out = Path(dest)
        out.mkdir(parents=True, exist_ok=True)
        for e in self.entries:
            src, dst = self.root / e.path, out / e.path
            dst.parent.mkdir(parents=True, exist_ok=True)
            if e.kind == "dir":
                dst.mkdir(exist_ok=True)
            elif e.kind == "link":
                os.symlink(os.readlink(src), dst)
                continue
            else:
                h = hashlib.sha256()
                try:
                    with src.open("rb") as fin, dst.open("wb") as fout:
                        while chunk := fin.read(_CHUNK):
                            h.update(chunk)
                            fout.write(chunk)
                except OSError as exc:
                    raise ContextError(f"cannot read build context file {e.path!r}: {exc.strerror}") from None
                if h.hexdigest() != e.digest:
                    raise ContextError(f"{e.path!r} changed while the image was being prepared; retry")
            os.chmod(dst, e.mode)
        return StagedContext(out, self.dockerfile, self.entries)


@dataclass(frozen=True)
class StagedContext:
    """A directory holding only the hashed entries, with the archive formats the builders upload."""

    directory: Path
    dockerfile: str
    entries: tuple[Entry, ...]

    def write_tar(self, fileobj: BinaryIO) -> None:
        """Uncompressed tar with fixed owners and mtimes (the Docker engine's build context format)."""
        with tarfile.open(fileobj=fileobj, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for e in self.entries:
                info = tar.gettarinfo(str(self.directory / e.path), arcname=e.path)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                info.mode = e.mode
                if info.isfile():
                    with (self.directory / e.path).open("rb") as handle:
                        tar.addfile(info, handle)
                else:
                    tar.addfile(info)

    def write_zip(self, path: str | os.PathLike[str]) -> None:
        """Zip with fixed timestamps and unix modes: CodeBuild takes an S3 source only as a zip."""
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for e in self.entries:
                name = e.path + "/" if e.kind == "dir" else e.path
                info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
                file_type = {"dir": stat.S_IFDIR, "link": stat.S_IFLNK, "file": stat.S_IFREG}[e.kind]
                info.external_attr = (file_type | e.mode) << 16
                info.create_system = 3  # unix, so the modes are honoured on extraction
                if e.kind == "dir":
                    archive.writestr(info, b"")
                elif e.kind == "link":
                    archive.writestr(info, os.readlink(self.directory / e.path))
                else:
                    info.compress_type = zipfile.ZIP_DEFLATED
                    with (
                        (self.directory / e.path).open("rb") as fin,
                        archive.open(info, "w") as fout,
                    ):
                        shutil.copyfileobj(fin, fout, _CHUNK)


class _Collector:
    """Expands COPY sources against the context, honouring .dockerignore."""

    def __init__(self, root: Path, rules: IgnoreRules) -> None:
        self.root = root
        self.rules = rules
        self.entries: dict[str, Entry] = {}

    def add(self, rel: str, force: bool = False) -> None:
        if rel in self.entries or (not force and self.rules.excluded(rel)):
            return
        self.entries[rel] = _entry(self.root, rel)

    def add_source(self, source: str) -> None:
        rel = posixpath.normpath(source.lstrip("/")) if source.strip("/") else "."
        if rel == ".." or rel.startswith("../"):
            raise ContextError(f"COPY source {source!r} points outside the build context")
        self._refuse_symlinked_parents(source, rel)
        if GLOB_CHARS & set(rel):
            self._add_glob(source, rel)
            return
        path = self.root / rel
        if not os.path.lexists(path):
            raise ContextError(f"COPY source {source!r} not found in build context {str(self.root)!r}")
        if path.is_dir() and not path.is_symlink():
            if rel != "." and self.rules.excluded(rel) and not self.rules.has_exceptions:
                raise ContextError(f"COPY source {source!r} is excluded by .dockerignore")
            for found in self._walk(rel):
                self.add(found)
        elif self.rules.excluded(rel):
            raise ContextError(f"COPY source {source!r} is excluded by .dockerignore")
        else:
            self.add(rel)

    def _refuse_symlinked_parents(self, source: str, rel: str) -> None:
        """A symlinked directory on the way to a source could lead anywhere on this machine (``/etc``, a
        home directory): such a path is refused, never followed. A symlink that is itself the source is
        copied as a link."""
        parts = rel.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/".join(parts[:depth])
            if GLOB_CHARS & set(parent):
                return  # the glob's matches are walked without following links
            if os.path.islink(self.root / parent):
                raise ContextError(
                    f"COPY source {source!r} passes through the symlinked directory {parent!r}; the build "
                    "context never follows symlinked directories (they may point outside it)"
                )

    def _add_glob(self, source: str, rel: str) -> None:
        parts = rel.split("/")
        literal = next(i for i, part in enumerate(parts) if GLOB_CHARS & set(part))
        base = "/".join(parts[:literal]) or "."
        regex = glob_to_regex(rel)
        depth = None if "**" in rel else len(parts)
        before = len(self.entries)
        if (self.root / base).is_dir():
            for found in self._walk(base, regex, depth):
                if matches_or_parent(regex, found):
                    self.add(found)
        if len(self.entries) == before:
            raise ContextError(f"COPY source {source!r} matches no file in the build context (after .dockerignore)")

    def _walk(self, base: str, regex: re.Pattern[str] | None = None, depth: int | None = None) -> Iterator[str]:
        """Context-relative paths under ``base`` (itself too unless it is the root), pruned where possible."""
        prunable = not self.rules.has_exceptions
        if base != ".":
            yield base
        for current, dirnames, filenames in os.walk(self.root / base, onerror=self._walk_error):
            rel_dir = Path(current).relative_to(self.root).as_posix()
            keep: list[str] = []
            for name in sorted(dirnames):
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if os.path.islink(self.root / rel):
                    yield rel
                    continue
                if prunable and self.rules.excluded(rel):
                    continue
                too_deep = depth is not None and rel.count("/") + 1 >= depth
                if regex is not None and too_deep and not matches_or_parent(regex, rel):
                    continue
                keep.append(name)
                yield rel
            dirnames[:] = keep
            for name in sorted(filenames):
                yield name if rel_dir == "." else f"{rel_dir}/{name}"

    @staticmethod
    def _walk_error(exc: OSError) -> None:
        raise ContextError(f"cannot read build context directory {exc.filename!r}: {exc.strerror}")
