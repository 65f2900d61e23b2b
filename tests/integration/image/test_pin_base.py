"""``make pin-base-digest`` against the local registry, on copies of the two files it writes."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from airflow_provider_trainium.image.dockerfile import base_image
from airflow_provider_trainium.image.pin_base import main
from tests.integration.image.conftest import LocalRegistry

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def pushed(local_registry: LocalRegistry, buildah_options: dict[str, str], tmp_path: Path) -> tuple[str, str, str]:
    """A tiny image pushed to the local registry as ``trainium/pin-base:<tag>``: image, tag, its digest."""
    buildah = ["buildah", "--storage-driver", "vfs", "--root", buildah_options["root"]]
    buildah += ["--runroot", buildah_options["runroot"]]

    def run(*args: str) -> str:
        return subprocess.run([*buildah, *args], capture_output=True, text=True, check=True).stdout.strip()

    (tmp_path / "f.txt").write_text("pin\n")
    container = run("from", "scratch")
    run("copy", container, str(tmp_path / "f.txt"), "/f.txt")
    run("commit", "-q", container, "localhost/pin-base:1")
    run("rm", container)
    image, tag = local_registry.repository("trainium/pin-base"), "2.9.0-neuronx-py312-sdk2.99.0-ubuntu24.04"
    run("push", "--tls-verify=false", "--digestfile", str(tmp_path / "digest"), "localhost/pin-base:1",
        f"docker://{image}:{tag}")  # fmt: skip
    return image, tag, (tmp_path / "digest").read_text().strip()


def copies(tmp_path: Path, image: str, tag: str) -> tuple[Path, Path]:
    """The project's two files, with ``[base]`` and ``ARG BASE_IMAGE`` pointed at the local registry."""
    versions, dockerfile = tmp_path / "neuron-versions.toml", tmp_path / "Dockerfile"
    base = tomllib.loads((REPO / "docker/neuron-versions.toml").read_text())["base"]
    text = (REPO / "docker/neuron-versions.toml").read_text()
    versions.write_text(text.replace(f'"{base["image"]}"', f'"{image}"', 1).replace(f'"{base["tag"]}"', f'"{tag}"', 1))
    text = (REPO / "docker/Dockerfile").read_text()
    dockerfile.write_text(re.sub(r"^ARG BASE_IMAGE=\S+$", f"ARG BASE_IMAGE={image}:{tag}", text, flags=re.M))
    return versions, dockerfile


def test_the_digest_goes_into_both_files_and_nothing_else_changes(
    pushed: tuple[str, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image, tag, digest = pushed
    versions, dockerfile = copies(tmp_path, image, tag)
    before = {p: p.read_text().splitlines() for p in (versions, dockerfile)}

    assert main(["--versions", str(versions), "--dockerfile", str(dockerfile), "--insecure"]) == 0
    base = tomllib.loads(versions.read_text())["base"]
    assert base["digest"] == digest
    today = dt.datetime.now(dt.UTC).date().isoformat()
    assert base["digest_source"] == f"resolved from {image.partition('/')[0]} on {today} by make pin-base-digest"
    # What test_pins.py requires: the Dockerfile's base is exactly image:tag@digest of the versions file.
    assert base_image(dockerfile.read_text()) == f"{base['image']}:{base['tag']}@{digest}"
    changed = {
        p.name: [(a, b) for a, b in zip(before[p], p.read_text().splitlines(), strict=True) if a != b] for p in before
    }
    expected = [f'digest = "{digest}"', f'digest_source = "{base["digest_source"]}"']
    assert [b for _, b in changed["neuron-versions.toml"]] == expected
    assert [b for _, b in changed["Dockerfile"]] == [f"ARG BASE_IMAGE={image}:{tag}@{digest}"]
    assert capsys.readouterr().out.splitlines()[0] == f"{image}:{tag}@{digest}"

    # Run again once pinned: the tag still names the same manifest, so the files stay as they are.
    pinned = dockerfile.read_text()
    assert main(["--versions", str(versions), "--dockerfile", str(dockerfile), "--insecure"]) == 0
    assert dockerfile.read_text() == pinned


def test_a_tag_the_registry_lacks_writes_nothing(
    local_registry: LocalRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    versions, dockerfile = copies(tmp_path, local_registry.repository("trainium/pin-base"), "no-such-tag")
    shutil.copy(versions, tmp_path / "versions.before")
    assert main(["--versions", str(versions), "--dockerfile", str(dockerfile), "--insecure"]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert versions.read_text() == (tmp_path / "versions.before").read_text()
