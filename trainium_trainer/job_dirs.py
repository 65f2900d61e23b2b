"""A user's job's local folders and their copies under the job's URIs: what makes unchanged scripts keep their work.

A script written for a laptop writes ``./outputs/model.pt`` or Hugging Face's ``./trainer_output``; in a container
those files die with it. The launcher (``trainium_trainer.launch``) gives every process of a user's job (a command, a
script, a ``@task.trainium`` function or a module outside ``trainer.*``) three folders under the node's job
folder (``TRAINIUM_JOB_DIR``, default ``/tmp/trainium-job``) and runs the job with the output folder as its
working directory:

- ``TRAINIUM_OUTPUT_DIR`` (the working directory) mirrors to ``TRAINIUM_OUTPUT_URI``;
- ``TRAINIUM_CHECKPOINT_DIR`` mirrors to ``TRAINIUM_CHECKPOINT_URI``;
- ``TRAINIUM_CODE_DIR``: the job's code bundle (``TRAINIUM_CODE_URI``), first on ``PYTHONPATH``.

Both mirrored folders are restored before the job starts (so a retry resumes), uploaded every
``TRAINIUM_CHECKPOINT_SYNC_S`` seconds while it runs and once more when it ends, whatever its exit status. The
output folder is treated like the checkpoint folder because scripts keep checkpoints in their output (Hugging
Face's ``output_dir/checkpoint-<step>``); what the provider and the monitor write under the output URI
(``stream/``, dot-folders) is not restored.

Which node's files are kept: node 0's by default (every node restores node 0's checkpoints, so a script whose
rank 0 saves and every rank loads resumes on every node); with ``--all-nodes-outputs`` every node keeps its own
under ``node-<i>/``. A file is uploaded while the job runs only once its size and modification time held still
between two scans (so a checkpoint being written is not copied half-way); the last upload after the job ends
takes everything. Files deleted locally since this launcher uploaded them are deleted remotely too (a
``save_total_limit`` rotation stays a rotation).

Runs in the container: the standard library and fsspec (s3fs for ``s3://``) only, imported when first needed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainium_trainer import boundary

NODE_FOLDER = "node-{index}"


@dataclass(frozen=True)
class JobDirs:
    """One node's local folders and where each goes."""

    root: Path
    node: int
    all_nodes: bool
    output_uri: str | None
    checkpoint_uri: str | None
    code_uri: str | None

    @property
    def output(self) -> Path:
        return self.root / "output"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def code(self) -> Path:
        return self.root / "code"

    def remote(self, uri: str | None) -> str | None:
        """Where this node's copy of a folder goes: ``uri`` itself, or its ``node-<i>/`` with every node kept."""
        if not uri:
            return None
        uri = uri.rstrip("/")
        return f"{uri}/{NODE_FOLDER.format(index=self.node)}" if self.all_nodes else uri

    @property
    def uploads(self) -> bool:
        """Whether this node uploads at all (node 0 only, unless every node's files are kept)."""
        return self.all_nodes or self.node == 0

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """What the launcher adds to the job's environment: the three folders, the code folder on PYTHONPATH."""
        path = [str(self.code), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
        return {
            boundary.ENV_OUTPUT_DIR: str(self.output),
            boundary.ENV_CHECKPOINT_DIR: str(self.checkpoints),
            boundary.ENV_CODE_DIR: str(self.code),
            "PYTHONPATH": os.pathsep.join(path),
        }


def job_dirs(env: Mapping[str, str], node: int, all_nodes: bool = False) -> JobDirs:
    root = Path(env.get(boundary.ENV_JOB_DIR, "").strip() or boundary.DEFAULT_JOB_DIR)
    return JobDirs(
        root=root,
        node=node,
        all_nodes=all_nodes,
        output_uri=env.get(boundary.ENV_OUTPUT_URI, "").strip() or None,
        checkpoint_uri=env.get(boundary.ENV_CHECKPOINT_URI, "").strip() or None,
        code_uri=env.get(boundary.ENV_CODE_URI, "").strip() or None,
    )


def in_code_folder(word: str, dirs: JobDirs) -> str:
    """``word`` as the command sees it from the output folder: a relative path naming a file of the code bundle
    (``train.py``, ``configs/run.yaml``) becomes that file's path; anything else is left as it is."""
    if not word or word.startswith("-") or os.path.isabs(word) or "=" in word:
        return word
    candidate = dirs.code / word
    return str(candidate) if candidate.is_file() else word


def _fs(uri: str) -> tuple[Any, str]:
    from fsspec.core import url_to_fs

    fs, path = url_to_fs(uri)
    return fs, path


def download(uri: str, into: Path, skip_top: tuple[str, ...] = ()) -> int:
    """Copy every file under ``uri`` into ``into``, but those under a top-level name in ``skip_top`` or starting
    with a dot; the number of files (0 when ``uri`` does not exist)."""
    fs, root = _fs(uri)
    root = root.rstrip("/")
    if not fs.exists(root):
        return 0
    count = 0
    for remote in fs.find(root):
        relative = remote[len(root) :].lstrip("/")
        top = relative.split("/", 1)[0]
        if not relative or top in skip_top or top.startswith("."):
            continue
        target = into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(remote, str(target))
        count += 1
    return count


def prepare(dirs: JobDirs, log: Any = print) -> None:
    """Make the folders, copy in the code bundle and the checkpoints a retry resumes from."""
    for folder in (dirs.output, dirs.checkpoints, dirs.code):
        folder.mkdir(parents=True, exist_ok=True)
    if dirs.code_uri:
        fs, root = _fs(dirs.code_uri)
        if not fs.exists(f"{root.rstrip('/')}/{boundary.CODE_BUNDLE_MARKER}"):
            raise FileNotFoundError(f"the code bundle {dirs.code_uri} is incomplete (no {boundary.CODE_BUNDLE_MARKER})")
        log(f"trainium_trainer.launch: {download(dirs.code_uri, dirs.code)} code file(s) from {dirs.code_uri}")
    # every node resumes from node 0's folders unless each node keeps its own
    for uri, folder, skip in (
        (dirs.checkpoint_uri, dirs.checkpoints, ()),
        (dirs.output_uri, dirs.output, (boundary.STREAM_DIR,)),
    ):
        source = dirs.remote(uri) if dirs.all_nodes else uri
        if source:
            restored = download(source, folder, skip)
            if restored:
                log(f"trainium_trainer.launch: restored {restored} file(s) from {source} into {folder}")


@dataclass
class Mirror:
    """Uploads a local folder to a URI, file by file, only what changed since this mirror last uploaded it."""

    local: Path
    uri: str
    uploaded: dict[str, tuple[int, int]] = field(default_factory=dict)
    _seen: dict[str, tuple[int, int]] = field(default_factory=dict)

    def scan(self) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        for path in self.local.rglob("*"):
            if path.is_file():
                stat = path.stat()
                found[path.relative_to(self.local).as_posix()] = (stat.st_size, stat.st_mtime_ns)
        return found

    def sync(self, final: bool = False) -> int:
        """Upload what changed; while running, only files that held still since the last scan. Returns the count."""
        now = self.scan()
        settled = now if final else {k: v for k, v in now.items() if self._seen.get(k) == v}
        self._seen = now
        todo = [name for name, state in sorted(settled.items()) if self.uploaded.get(name) != state]
        gone = [name for name in self.uploaded if name not in now]
        if not todo and not gone:
            return 0
        fs, root = _fs(self.uri)
        root = root.rstrip("/")
        from fsspec.implementations.local import LocalFileSystem

        local_fs = isinstance(fs, LocalFileSystem)
        for name in todo:
            target = f"{root}/{name}"
            fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
            if local_fs:  # a reader never sees half a file
                fs.put_file(str(self.local / name), target + ".part")
                fs.mv(target + ".part", target)
            else:
                fs.put_file(str(self.local / name), target)
            self.uploaded[name] = settled[name]
        for name in gone:
            if fs.exists(f"{root}/{name}"):
                fs.rm_file(f"{root}/{name}")
            del self.uploaded[name]
        return len(todo)


def sync_seconds(env: Mapping[str, str]) -> float:
    value = env.get(boundary.ENV_CHECKPOINT_SYNC_S, "").strip()
    try:
        return float(value) if value else float(boundary.DEFAULT_CHECKPOINT_SYNC_S)
    except ValueError:
        raise ValueError(f"{boundary.ENV_CHECKPOINT_SYNC_S}={value!r} is not a number of seconds") from None


def mirrors(dirs: JobDirs) -> list[Mirror]:
    """The folders this node uploads: none on a node whose files are not kept."""
    if not dirs.uploads:
        return []
    pairs = ((dirs.output, dirs.remote(dirs.output_uri)), (dirs.checkpoints, dirs.remote(dirs.checkpoint_uri)))
    found = [Mirror(local, uri) for local, uri in pairs if uri]
    for mirror in found:  # what was just restored is there already
        mirror.uploaded = mirror.scan()
    return found


def run(command: list[str], env: Mapping[str, str], dirs: JobDirs, log: Any = print, lines: Any = None) -> int:
    """Run ``command`` in the output folder, mirroring both folders on an interval and once more when it ends.

    SIGTERM and SIGINT (an ECS stop, a Batch cancel, local compute's kill) go on to the command, so it can save;
    the uploads then still run before the launcher exits with the command's status. With ``lines`` (a
    ``metric_lines.MetricLines``) the command's stdout passes through this process, line by line, unchanged, and
    each line is fed to it.
    """
    every = sync_seconds(env)
    folders = mirrors(dirs)
    process = subprocess.Popen(command, env=dict(env), cwd=dirs.output,
                               stdout=subprocess.PIPE if lines is not None else None)  # fmt: skip
    reader = None if lines is None else threading.Thread(target=pass_lines, args=(process.stdout, lines), daemon=True)
    if reader:
        reader.start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, frame: process.send_signal(number))
    stop = threading.Event()

    def periodic() -> None:
        while not stop.wait(every):
            for mirror in folders:
                try:
                    mirror.sync()
                except Exception as err:  # noqa: BLE001 - a failed upload is retried on the next interval
                    log(f"trainium_trainer.launch: upload to {mirror.uri} failed ({err}); retrying in {every:g} s")

    uploader = threading.Thread(target=periodic, daemon=True) if folders and every > 0 else None
    if uploader:
        uploader.start()
    code = process.wait()
    if reader:
        reader.join()
        lines.close()
    stop.set()
    if uploader:
        uploader.join()
    for mirror in folders:
        log(f"trainium_trainer.launch: {mirror.sync(final=True)} file(s) of {mirror.local} uploaded to {mirror.uri}")
    return code


def pass_lines(stream: Any, lines: Any) -> None:
    """Copy ``stream`` to this process's stdout line by line and feed each line to ``lines``; a line it cannot
    read is passed on all the same (the curves are an observer, the output is the job's)."""
    out = sys.stdout.buffer
    for raw in iter(stream.readline, b""):
        out.write(raw)
        out.flush()
        try:
            lines.feed(raw.decode("utf-8", errors="replace"))
        except Exception:  # noqa: BLE001 - a bad line never stops the job's output
            continue
