"""The built wheel, once per session, for the tests of what a deployment installs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The wheel as ``uv build`` makes it from a clean copy of the sources: sdist first, wheel from the sdist, so
    MANIFEST.in is tested too (a checkout's ``build/`` or ``*.egg-info`` would fill gaps in it); this environment's
    setuptools (the lock's) is the backend."""
    source = tmp_path_factory.mktemp("source")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, check=True, capture_output=True, text=True,
    ).stdout.split("\0")  # fmt: skip
    for relative in filter(None, listed):
        if (REPO / relative).is_file():
            (source / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / relative, source / relative)
    out = tmp_path_factory.mktemp("dist")
    uv = Path(sys.executable).parent / "uv"
    subprocess.run(
        [str(uv), "build", "-q", "--no-build-isolation", "-p", sys.executable, "-o", str(out), str(source)],
        check=True, timeout=300,
    )  # fmt: skip
    (path,) = out.glob("*.whl")
    return path
