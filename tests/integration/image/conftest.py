"""Fixtures for the image tests: a real OCI registry on loopback, buildah with throwaway storage."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airflow_provider_trainium.image.builders.base import Builder, BuildOutput, BuildRequest
from tests.conftest import free_port, write_tree  # noqa: F401 (the image tests import it from here)

# -- reading requirements files and Dockerfiles (the pin tests of both images) ---------------------------------------


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Pin:
    version: str
    hashes: tuple[str, ...]


def read_pins(path: Path) -> dict[str, Pin]:
    """``name==version`` requirements of a pip requirements file, continuation lines joined."""
    text = re.sub(r"\\\n", " ", path.read_text())
    pins: dict[str, Pin] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9_.\-]*)(?:\[[^\]]*\])?==(\S+)(.*)$", line)
        if match:
            pins[canonical(match[1])] = Pin(match[2], tuple(re.findall(r"--hash=sha256:([0-9a-f]{64})", match[3])))
    return pins


def requirement_names(path: Path) -> set[str]:
    """Project names a requirements input file asks for, whatever their specifier."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {canonical(match[0]) for line in lines if (match := re.match(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", line))}


def build_args(instructions: list[tuple[str, str]]) -> dict[str, str]:
    """``ARG NAME=default`` of a Dockerfile's logical lines (args without a default are left out)."""
    return {rest.split("=", 1)[0]: rest.split("=", 1)[1] for ins, rest in instructions if ins == "ARG" and "=" in rest}


def require_tool(name: str) -> str:
    """The tool's path. Missing: a skip naming the package here, a failure in CI (system-deps installs it)."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} is not installed (apt-get install {name}; .ci/system-deps.sh does this)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@dataclass
class LocalRegistry:
    """A ``docker-registry serve`` process on 127.0.0.1 with its storage in a temp dir."""

    host: str
    storage: Path

    def repository(self, name: str) -> str:
        return f"{self.host}/{name}"


@pytest.fixture(scope="session")
def local_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    import requests

    binary = require_tool("docker-registry")
    base = tmp_path_factory.mktemp("registry")
    port = free_port()
    config = base / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {base / 'storage'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log_file = (base / "registry.log").open("w")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=log_file, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v2/"
    deadline = time.monotonic() + 30
    while True:  # readiness probe: the registry answers /v2/ once it listens
        try:
            if requests.get(url, timeout=1).status_code == 200:
                break
        except requests.ConnectionError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"docker-registry did not start: {(base / 'registry.log').read_text()[-2000:]}")
        time.sleep(0.1)
    yield LocalRegistry(f"127.0.0.1:{port}", base / "storage")
    proc.terminate()
    proc.wait(timeout=10)
    log_file.close()


@pytest.fixture(scope="session")
def buildah_options(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """buildah with vfs storage and chroot isolation in a throwaway root: no daemon, no host state."""
    require_tool("buildah")
    base = tmp_path_factory.mktemp("buildah")
    return {"root": str(base / "root"), "runroot": str(base / "runroot")}


@dataclass
class CountingBuilder:
    """Wraps a real builder and counts how often the pipeline asked it to build."""

    inner: Builder
    requests: list[BuildRequest] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def calls(self) -> int:
        return len(self.requests)

    def build(self, request: BuildRequest) -> BuildOutput | str | None:
        self.requests.append(request)
        return self.inner.build(request)
