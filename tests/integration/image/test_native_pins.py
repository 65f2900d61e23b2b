"""The native image's Dockerfile, requirements and versions file agree with each other and with the release table.

docker/native/neuron-versions.toml names every pin of docker/native/Dockerfile and its source. These tests fail as
soon as the Dockerfile's build args, docker/native/requirements*.txt or the native row of
airflow_provider_trainium/neuron/releases.toml drift from it, the stacks' default driver for the native image's hosts
(cloudformation/batch.yaml NativeNeuronDriverVersion, the driver cloudformation/ecs.yaml names) is not the release's,
an install step reads a second index, or the hashed PyPI layer starts to carry torch, CUDA or a Neuron package.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.image.context import BuildContext
from airflow_provider_trainium.image.dockerfile import logical_lines
from airflow_provider_trainium.neuron.container_contract import IMAGE_CMD, IMAGE_ENTRYPOINT
from airflow_provider_trainium.neuron.releases import RUNTIME_LABEL, SDK_LABEL, image_stack, table
from tests.integration.cloudformation.conftest import load_template, template_path
from tests.integration.image.conftest import (
    Pin,
    assert_base_image_pinned,
    assert_hadolint_clean,
    build_args,
    read_pins,
    requirement_names,
)

REPO = Path(__file__).resolve().parents[3]
NATIVE = REPO / "docker" / "native"
DOCKERFILE = NATIVE / "Dockerfile"
INDEXES = {
    "requirements-torch.txt": "https://download.pytorch.org/whl/cpu",
    "requirements-neuron.txt": "https://pip.repos.neuron.amazonaws.com",
    "requirements.txt": "https://pypi.org/simple",
}
# Dockerfile build args that carry a version of the versions file (apt pins and labels).
APT_ARGS = {
    "aws-neuronx-runtime-lib": "NEURONX_RUNTIME_LIB_VERSION",
    "aws-neuronx-collectives": "NEURONX_COLLECTIVES_LIB_VERSION",
    "aws-neuronx-tools": "NEURONX_TOOLS_VERSION",
}
LABEL_ARGS = {
    "torch-neuronx": "TORCH_NEURONX_VERSION",
    "neuronx-cc": "NEURONX_CC_VERSION",
    "torch": "TORCH_VERSION",
    "transformers": "TRANSFORMERS_VERSION",
}
# Never in the hashed PyPI layer: they come from their own index, or (CUDA) must not be in the image at all.
NOT_FROM_PYPI = frozenset({"torch", "torch-neuronx", "neuronx-cc", "nki", "torch-xla", "triton"})
CUDA_PREFIXES = ("nvidia-", "cuda-")
# The Python versions of the torch-neuronx 2.14.3.0.* family (TorchNeuron release notes, Neuron 2.33.0, support matrix;
# Neuron 2.33.1 keeps that torch-neuronx).
SUPPORTED_PYTHONS = ("3.12", "3.13", "3.14")


@pytest.fixture(scope="module")
def versions() -> dict[str, Any]:
    return tomllib.loads((NATIVE / "neuron-versions.toml").read_text())


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    return logical_lines(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def layer() -> dict[str, Pin]:
    return read_pins(NATIVE / "requirements.txt")


def test_every_pin_names_its_source(versions: dict[str, Any]) -> None:
    assert versions["sdk"]["version"] and versions["sdk"]["source"]
    assert versions["base"]["image"] and versions["base"]["tag"] and versions["base"]["source"]
    for section in ("apt", "host", "neuron", "torch", "pypi", "not_installed"):
        for name, entry in versions[section].items():
            assert entry.get("source"), f"[{section}.{name}] needs a source"
            if section != "not_installed":
                assert entry.get("version"), f"[{section}.{name}] needs a version"
            else:
                assert entry.get("reason"), f"[{section}.{name}] needs the reason it is left out"
            if entry.get("guess"):
                assert entry.get("derived"), f"[{section}.{name}] is a guess: say how it was derived"


def test_the_versions_file_is_the_release_tables_native_image_release(
    versions: dict[str, Any], instructions: list[tuple[str, str]]
) -> None:
    """The provider judges drivers, families and stacks by its release table: the image must be that release."""
    release = table().image_for("native")
    assert release.stack == "native"
    assert versions["sdk"]["version"] == release.version
    assert versions["apt"]["aws-neuronx-runtime-lib"]["version"] == release.runtime
    assert versions["apt"]["aws-neuronx-collectives"]["version"] == release.collectives
    assert versions["host"]["aws-neuronx-dkms"]["version"] == release.driver
    assert versions["neuron"]["neuronx-cc"]["version"] == release.compiler
    assert versions["neuron"]["torch-neuronx"]["version"] == f"{release.torch_neuronx}.*"
    assert versions["torch"]["torch"]["version"] == release.torch
    assert versions["base"]["python"] == release.python
    assert not release.dlc, "a native release with a DLC would be built FROM it, as docker/Dockerfile is"
    args = build_args(instructions)
    assert args["NEURON_SDK_VERSION"] == release.version
    assert args["NEURON_RUNTIME_VERSION"] == release.runtime


def test_the_stacks_pin_the_native_releases_driver_on_its_hosts(versions: dict[str, Any]) -> None:
    """A host whose driver is not the one the image's release ships may reject its runtime (nrt_init() fails): the
    Batch stack's Trn2 default is that driver, and the ECS template names it for a native cluster's
    NeuronDriverVersion, together with the release."""
    release = table().image_for("native")
    driver = versions["host"]["aws-neuronx-dkms"]["version"]
    parameter = load_template("batch")["Parameters"]["NativeNeuronDriverVersion"]
    assert parameter["Default"] == driver
    assert f"such as {driver}" in parameter["ConstraintDescription"]
    assert f"driver of its Neuron release, {release.version})" in " ".join(parameter["Description"].split())
    ecs = " ".join(line.strip().lstrip("#").strip() for line in template_path("ecs").read_text().splitlines())
    assert f"a Trn2 cluster for the native image ({release.version}) needs that release's driver, {driver}." in ecs


def test_the_images_labels_make_the_provider_see_a_native_image(instructions: list[tuple[str, str]]) -> None:
    args = build_args(instructions)
    labels = " ".join(rest for ins, rest in instructions if ins == "LABEL")
    assert f'{RUNTIME_LABEL}="${{NEURON_RUNTIME_VERSION}}"' in labels
    assert f'{SDK_LABEL}="${{NEURON_SDK_VERSION}}"' in labels
    as_built = {RUNTIME_LABEL: args["NEURON_RUNTIME_VERSION"], SDK_LABEL: args["NEURON_SDK_VERSION"]}
    assert image_stack("registry.example/trainium@sha256:" + "0" * 64, as_built) == "native"


def test_apt_pins_and_labels_are_the_versions_file(
    versions: dict[str, Any], instructions: list[tuple[str, str]]
) -> None:
    args = build_args(instructions)
    for name, arg in APT_ARGS.items():
        assert args[arg] == versions["apt"][name]["version"], f"Dockerfile ARG {arg}"
        install = f'"{name}=${{{arg}}}-*"'
        assert any(ins == "RUN" and install in rest for ins, rest in instructions), f"no apt pin {install}"
    flat = {**versions["neuron"], **versions["torch"], **versions["pypi"]}
    for name, arg in LABEL_ARGS.items():
        assert args[arg] == flat[name]["version"], f"Dockerfile ARG {arg} != {name} {flat[name]['version']}"


def test_base_image_is_the_versions_file_tag_and_digest(
    versions: dict[str, Any], instructions: list[tuple[str, str]]
) -> None:
    """Ubuntu 26.04 by tag (the torch-neuronx wheels of 2.33.0, which 2.33.1 keeps, exist for 26.04 only); the digest
    once it is sourced."""
    base = versions["base"]
    assert_base_image_pinned(base, instructions)
    assert base["os"] == f"ubuntu {base['tag']}" and base["codename_source"]


def test_the_image_runs_the_bases_own_python_in_the_supported_range(versions: dict[str, Any]) -> None:
    """The Python the base's archive ships, installed, made the venv, and the one the PyPI layer was compiled for."""
    python = versions["base"]["python"]
    assert python in SUPPORTED_PYTHONS, f"TorchNeuron 2.14.3.0.* supports {SUPPORTED_PYTHONS}, not {python}"
    assert versions["base"]["python_source"]
    text = DOCKERFILE.read_text()
    assert f"python{python} python{python}-venv" in text
    assert f"then python{python} -m venv /opt/venv;" in text
    assert not set(re.findall(r"python(3\.\d+)", text)) - {python}, "another Python version in the Dockerfile"
    header = (NATIVE / "requirements.in").read_text()
    assert f"--python-version {python} " in header, "docker/native/requirements.in compiles for another Python"


def test_the_neuron_apt_repository_is_the_bases_codename(
    versions: dict[str, Any], instructions: list[tuple[str, str]]
) -> None:
    """`${VERSION_CODENAME} main` read from the base's /etc/os-release, as the Neuron setup pages write it."""
    repository = versions["apt"]["repository"]
    assert repository["version"] == "${VERSION_CODENAME} main" and repository["guess"] and repository["derived"]
    (run,) = [rest for ins, rest in instructions if ins == "RUN" and "sources.list.d/neuron.list" in rest]
    assert ". /etc/os-release" in run
    assert f"https://apt.repos.neuron.amazonaws.com {repository['version']}" in run
    assert versions["base"]["codename"] == "resolute"  # what VERSION_CODENAME is on ubuntu:26.04


def test_each_pip_step_installs_its_file_from_one_index(
    versions: dict[str, Any], instructions: list[tuple[str, str]]
) -> None:
    installs = [rest for ins, rest in instructions if ins == "RUN" and "pip install" in rest]
    assert len(installs) == len(INDEXES), installs
    for filename, index in INDEXES.items():
        (run,) = [r for r in installs if f"/opt/trainium/{filename}" in r]
        assert run.count("--index-url") == 1 and f"--index-url {index}" in run, run
        assert "--extra-index-url" not in run and "--find-links" not in run, run
        assert "--isolated" in run and "--no-deps" in run, run
        copied = [rest for ins, rest in instructions if ins == "COPY" and f"docker/native/{filename}" in rest]
        assert copied, f"docker/native/{filename} is installed but never copied"
    (pypi,) = [r for r in installs if "/opt/trainium/requirements.txt" in r]
    assert "--require-hashes" in pypi and "pip check" in pypi
    # the other two files hold exactly the versions file's sections
    torch = {name: pin.version for name, pin in read_pins(NATIVE / "requirements-torch.txt").items()}
    assert torch == {name: entry["version"] for name, entry in versions["torch"].items()}
    neuron = {name: pin.version for name, pin in read_pins(NATIVE / "requirements-neuron.txt").items()}
    assert neuron == {name: entry["version"] for name, entry in versions["neuron"].items()}


def test_the_pypi_layer_is_hashed_and_holds_the_shared_pins(versions: dict[str, Any], layer: dict[str, Pin]) -> None:
    unhashed = sorted(name for name, pin in layer.items() if not pin.hashes)
    assert layer and not unhashed, f"no --hash for {unhashed}"
    for name, entry in versions["pypi"].items():
        assert name in layer and layer[name].version == entry["version"], f"{name}: {layer.get(name)}"
        assert name in requirement_names(NATIVE / "requirements.in")
    stray = sorted(name for name in layer if name in NOT_FROM_PYPI or name.startswith(CUDA_PREFIXES))
    assert not stray, f"docker/native/requirements.txt must not carry {stray}"


def test_the_shared_pins_are_the_cpu_test_environments(versions: dict[str, Any]) -> None:
    """The native trainer's tests run in .venv-native (requirements-native.lock): the image must carry the same
    trainer packages and the same torch."""
    lock = read_pins(REPO / "requirements-native.lock")
    for name, entry in {**versions["pypi"], "torch": versions["torch"]["torch"]}.items():
        assert name in lock and lock[name].version == entry["version"], f"{name}: native lock {lock.get(name)}"


def test_the_native_dockerfile_keeps_the_container_contract(instructions: list[tuple[str, str]]) -> None:
    """The launcher is the ENTRYPOINT and there is no CMD, as in docker/Dockerfile; the same layout and paths."""
    import json

    (entrypoint,) = [rest for ins, rest in instructions if ins == "ENTRYPOINT"]
    assert tuple(json.loads(entrypoint)) == IMAGE_ENTRYPOINT and not IMAGE_CMD
    assert not [rest for ins, rest in instructions if ins == "CMD"]
    xla = logical_lines((REPO / "docker" / "Dockerfile").read_text())
    assert [r for i, r in instructions if i == "WORKDIR"] == [r for i, r in xla if i == "WORKDIR"]
    env = " ".join(rest for ins, rest in instructions if ins == "ENV")
    assert "PYTHONPATH=/opt/trainium" in env and 'PATH="/opt/venv/bin:' in env
    assert ("HEALTHCHECK", "NONE") in instructions
    # the skip args of docker/Dockerfile, so the stand-in build works the same way for both
    assert {"INSTALL_NEURON_PACKAGES", "INSTALL_PYPI_PACKAGES"} <= set(build_args(instructions))
    kinds = [ins for ins, _ in instructions]
    assert kinds.index("RUN") < max(i for i, k in enumerate(kinds) if k == "COPY")  # dependencies before code


def test_hadolint_is_clean() -> None:
    assert_hadolint_clean(DOCKERFILE)


def test_the_build_context_is_the_native_files_and_the_trainer() -> None:
    paths = {e.path for e in BuildContext.load(REPO, "docker/native/Dockerfile").entries}
    assert {f"docker/native/{name}" for name in INDEXES} | {"docker/native/Dockerfile"} <= paths
    assert "trainium_trainer/launch.py" in paths
    assert all(p == "trainium_trainer" or p.startswith(("docker/native/", "trainium_trainer/")) for p in paths), sorted(
        paths
    )
