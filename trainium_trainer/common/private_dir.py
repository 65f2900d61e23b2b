"""Directories whose contents the trainer executes: only this user may write them.

torch-xla's persistent cache on the CPU stores compiled executables, native code that the next run loads
without a check. Whoever can write such a directory (or a directory above it that lets them swap it) can run
code in the trainer, so the trainer refuses one that another user owns or that group or others may write.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def private_dir_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is not this user's alone to write (None: it is)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a directory"
    if info.st_uid != os.geteuid():
        return f"{path} is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def ensure_private_dir(path: str | os.PathLike[str], *, what: str) -> Path:
    """Create ``path`` (mode 0700 where new) and check it and its parent; ValueError naming the problem."""
    target = Path(path)
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    for checked in (target.parent, target):
        problem = private_dir_problem(checked)
        if problem:
            raise ValueError(
                f"{what}: {problem}. Its entries are native code the trainer loads, so only the user that runs "
                f"the trainer may write it: chown it to that user and chmod go-w"
            )
    return target
