"""A real build and push with buildah into a local registry, then the same request served without a build."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from airflow_provider_trainium.image.builders.buildah import BuildahBuilder
from airflow_provider_trainium.image.container_registry import OciRegistry
from airflow_provider_trainium.image.context import BuildContext
from airflow_provider_trainium.image.ensure import ensure_image
from airflow_provider_trainium.image.errors import BuildFailed
from tests.integration.image.conftest import CountingBuilder, LocalRegistry, write_tree

pytestmark = pytest.mark.slow

DOCKERFILE = """\
FROM scratch
ARG SOURCE_REVISION=unknown
COPY payload/ /payload/
COPY run.sh /run.sh
LABEL org.opencontainers.image.revision="${SOURCE_REVISION}"
"""


def make_app(root: Path, marker: str, dockerfile: str = DOCKERFILE) -> Path:
    return write_tree(
        root,
        {
            "Dockerfile": dockerfile,
            "payload/data.txt": f"payload {marker}\n",
            "run.sh": "#!/bin/sh\n",
            "junk.txt": "x",
        },
    )


def fetch(registry: LocalRegistry, name: str, ref: str, kind: str = "manifests") -> bytes:
    import requests

    accept = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
    response = requests.get(f"http://{registry.host}/v2/{name}/{kind}/{ref}", headers={"Accept": accept}, timeout=10)
    response.raise_for_status()
    return response.content


def test_build_push_then_skip_returns_the_same_digest(
    local_registry: LocalRegistry, buildah_options: dict[str, str], tmp_path: Path
) -> None:
    app = make_app(tmp_path / "app", "one")
    (app / "run.sh").chmod(0o755)
    registry = OciRegistry(local_registry.repository("trainium/first"), insecure=True)
    builder = CountingBuilder(BuildahBuilder(**buildah_options))
    context = BuildContext.load(app, build_args={"SOURCE_REVISION": "rev-1"})
    assert registry.lookup(context.tag()) is None

    first = ensure_image(context, registry, builder)
    assert first.built and builder.calls == 1
    assert first.digest.startswith("sha256:") and first.tag == context.tag()
    assert first.reference == f"{local_registry.host}/trainium/first@{first.digest}"

    # What the registry holds is the image of this context: files, modes and label.
    manifest = json.loads(fetch(local_registry, "trainium/first", first.digest))
    config = json.loads(fetch(local_registry, "trainium/first", manifest["config"]["digest"], "blobs"))
    assert config["config"]["Labels"]["org.opencontainers.image.revision"] == "rev-1"
    members: dict[str, tarfile.TarInfo] = {}
    contents: dict[str, bytes] = {}
    for layer in manifest["layers"]:
        blob = fetch(local_registry, "trainium/first", layer["digest"], "blobs")
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob) if blob[:2] == b"\x1f\x8b" else blob)) as tar:
            for member in tar.getmembers():
                members[member.name.lstrip("./")] = member
                if member.isfile():
                    contents[member.name.lstrip("./")] = tar.extractfile(member).read()  # type: ignore[union-attr]
    assert contents["payload/data.txt"] == b"payload one\n"
    assert members["run.sh"].mode & 0o777 == 0o755
    assert "junk.txt" not in members

    # A second worker with a fresh checkout: same content, new mtimes -> no build, same digest.
    clone = make_app(tmp_path / "clone", "one")
    (clone / "run.sh").chmod(0o755)
    second = ensure_image(BuildContext.load(clone, build_args={"SOURCE_REVISION": "rev-1"}), registry, builder)
    assert builder.calls == 1
    assert not second.built
    assert (second.digest, second.reference, second.tag) == (first.digest, first.reference, first.tag)


def test_failed_build_reports_the_log_tail_and_pushes_nothing(
    local_registry: LocalRegistry, buildah_options: dict[str, str], tmp_path: Path
) -> None:
    app = make_app(tmp_path / "bad", "bad", DOCKERFILE + "RUN exit 3\n")
    registry = OciRegistry(local_registry.repository("trainium/broken"), insecure=True)
    context = BuildContext.load(app)
    with pytest.raises(BuildFailed) as failure:
        ensure_image(context, registry, BuildahBuilder(**buildah_options))
    message = str(failure.value)
    assert "buildah build of" in message and "exit code" in message
    assert "last lines of the build log" in message
    assert "RUN exit 3" in message  # the failing step, from buildah's own output
    assert registry.lookup(context.tag()) is None


def test_command_line_builds_once_then_reports_the_existing_image(
    local_registry: LocalRegistry,
    buildah_options: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from airflow_provider_trainium.image.__main__ import main

    app = make_app(tmp_path / "cli", "cli")
    argv = ["--context", str(app), "--dockerfile", "Dockerfile", "--insecure"]
    argv += [
        "--repository",
        local_registry.repository("trainium/cli"),
        "--buildah-root",
        buildah_options["root"],
    ]
    argv += ["--buildah-runroot", buildah_options["runroot"]]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    second = json.loads(capsys.readouterr().out)
    assert (first["built"], second["built"]) == (True, False)
    assert first["image"] == second["image"] and first["digest"].startswith("sha256:")
    assert main(["--context", str(tmp_path / "missing"), "--repository", "localhost:1/x"]) == 1
    assert "is not a directory" in capsys.readouterr().err
