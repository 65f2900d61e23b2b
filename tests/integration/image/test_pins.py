"""The image and the CPU test environment run the same versions, all from one sourced versions file.

docker/neuron-versions.toml names every Neuron-side pin and its source. These tests fail as soon as
requirements.lock, pyproject.toml, docker/requirements*.txt or docker/Dockerfile drift from it, or a lock
loses its hashes, or an install step merges the Neuron repository with PyPI.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.image.dockerfile import logical_lines
from tests.integration.image.conftest import (
    Pin,
    assert_base_image_pinned,
    build_args,
    canonical,
    read_pins,
    requirement_names,
)

REPO = Path(__file__).resolve().parents[3]
DOCKER = REPO / "docker"
NEURON_INDEX = "https://pip.repos.neuron.amazonaws.com"
PYPI_INDEX = "https://pypi.org/simple"
# Dockerfile build args that record a version from the versions file in the image labels.
VERSION_ARGS = {
    "torch": "TORCH_VERSION",
    "torch-xla": "TORCH_XLA_VERSION",
    "transformers": "TRANSFORMERS_VERSION",
    "torch-neuronx": "TORCH_NEURONX_VERSION",
    "neuronx-cc": "NEURONX_CC_VERSION",
    "neuronx-distributed": "NEURONX_DISTRIBUTED_VERSION",
}


@pytest.fixture(scope="module")
def versions() -> dict[str, Any]:
    return tomllib.loads((DOCKER / "neuron-versions.toml").read_text())


@pytest.fixture(scope="module")
def lock() -> dict[str, Pin]:
    return read_pins(REPO / "requirements.lock")


@pytest.fixture(scope="module")
def image_pins() -> dict[str, Pin]:
    return read_pins(DOCKER / "requirements.txt")


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return logical_lines((DOCKER / "Dockerfile").read_text())


def trainer_extra() -> dict[str, str]:
    """The ``trainer`` extra of pyproject.toml: canonical name -> the specifier text after the name."""
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["trainer"]
    split = [re.match(r"([A-Za-z0-9_.\-]+)(.*)", req) for req in extra]
    return {canonical(match[1]): match[2] for match in split if match}


def test_every_pin_names_its_source(versions: dict[str, Any]) -> None:
    assert versions["sdk"]["version"] and versions["sdk"]["source"]
    assert versions["base"]["image"] and versions["base"]["tag"] and versions["base"]["source"]
    for section in ("neuron", "base_only", "pypi"):
        for name, entry in versions[section].items():
            assert entry.get("version") and entry.get("source"), f"[{section}.{name}] needs a version and a source"
            if entry.get("guess"):
                assert entry.get("derived") or "not stated" in entry["source"] or "MANIF" in entry["source"], (
                    f"[{section}.{name}] is a guess: say how it was derived"
                )
    for name, entry in versions["image_only"].items():
        assert entry.get("reason"), f"[image_only.{name}] needs a reason"


def test_shared_pypi_pins_are_equal_in_lock_pyproject_and_image(
    versions: dict[str, Any], lock: dict[str, Pin], image_pins: dict[str, Pin], dockerfile: list[tuple[str, str]]
) -> None:
    extra = trainer_extra()
    args = build_args(dockerfile)
    for name, entry in versions["pypi"].items():
        version = entry["version"]
        assert name in lock and lock[name].version == version, (
            f"{name}: versions file {version}, requirements.lock {lock.get(name)}"
        )
        assert extra.get(name) == f"=={version}", f"{name}: pyproject trainer extra has {extra.get(name)!r}"
        if entry["image"] == "layer":
            assert name in image_pins and image_pins[name].version == version, (
                f"{name}: versions file {version}, docker/requirements.txt {image_pins.get(name)}"
            )
        else:
            assert entry["image"] == "base", f"{name}: image must be 'base' or 'layer'"
            assert name not in image_pins, f"{name} belongs to the base image; docker/requirements.txt must not move it"
        if name in VERSION_ARGS:
            assert args[VERSION_ARGS[name]] == version, f"Dockerfile ARG {VERSION_ARGS[name]} != {version}"


def test_every_trainer_requirement_is_shared_or_declared_image_only(versions: dict[str, Any]) -> None:
    declared = set(versions["pypi"]) | set(versions["image_only"])
    assert not set(versions["pypi"]) & set(versions["image_only"])
    for source, names in (
        ("pyproject.toml [trainer]", set(trainer_extra())),
        ("docker/requirements.in", requirement_names(DOCKER / "requirements.in")),
    ):
        missing = names - declared
        assert not missing, f"{source} lists {sorted(missing)}, absent from docker/neuron-versions.toml"


def test_neuron_pins_are_the_versions_file_and_the_labels(
    versions: dict[str, Any], lock: dict[str, Pin], image_pins: dict[str, Pin], dockerfile: list[tuple[str, str]]
) -> None:
    neuron = {name: entry["version"] for name, entry in versions["neuron"].items()}
    installed = {name: pin.version for name, pin in read_pins(DOCKER / "requirements-neuron.txt").items()}
    assert installed == neuron
    args = build_args(dockerfile)
    for name, version in neuron.items():
        assert args[VERSION_ARGS[name]] == version, f"Dockerfile ARG {VERSION_ARGS[name]} != {version}"
        assert name not in image_pins and name not in lock, f"{name} is a Neuron name: only the Neuron index has it"
    assert args["NEURON_SDK_VERSION"] == versions["sdk"]["version"]


def test_versions_file_is_the_release_tables_image_release(
    versions: dict[str, Any], dockerfile: list[tuple[str, str]]
) -> None:
    """The provider judges drivers and families by its release table: the image must be that release."""
    from airflow_provider_trainium.neuron.releases import table

    release = table().image
    assert versions["sdk"]["version"] == release.version
    assert f"{versions['base']['image']}:{versions['base']['tag']}" == release.dlc
    assert versions["neuron"]["torch-neuronx"]["version"] == release.torch_neuronx
    assert versions["neuron"]["neuronx-cc"]["version"] == release.compiler
    assert versions["neuron"]["neuronx-distributed"]["version"] == release.neuronx_distributed
    assert versions["base_only"]["aws-neuronx-runtime-lib"]["version"] == release.runtime
    assert versions["base_only"]["aws-neuronx-collectives"]["version"] == release.collectives
    assert versions["pypi"]["torch"]["version"] == release.torch
    assert versions["pypi"]["transformers"]["version"] == release.transformers
    assert versions["base"]["python"] == release.python
    # the image says which runtime it carries, so a job can be checked against its hosts' driver
    assert build_args(dockerfile)["NEURON_RUNTIME_VERSION"] == release.runtime


def test_base_image_is_the_versions_file_tag_and_digest(
    versions: dict[str, Any], dockerfile: list[tuple[str, str]]
) -> None:
    assert_base_image_pinned(versions["base"], dockerfile)
    assert f"sdk{versions['sdk']['version']}" in versions["base"]["tag"]


def test_each_install_step_reads_one_index(dockerfile: list[tuple[str, str]]) -> None:
    installs = [rest for ins, rest in dockerfile if ins == "RUN" and "pip install" in rest]
    neuron = [run for run in installs if "requirements-neuron.txt" in run]
    pypi = [run for run in installs if "/requirements.txt" in run]
    assert len(neuron) == 1 and len(pypi) == 1 and len(installs) == 2, installs
    for run in installs:
        assert "--extra-index-url" not in run and "--find-links" not in run and "--isolated" in run, run
        assert run.count("--index-url") == 1 and "--no-deps" in run, run
    assert f"--index-url {NEURON_INDEX}" in neuron[0]
    assert f"--index-url {PYPI_INDEX}" in pypi[0] and "--require-hashes" in pypi[0]


@pytest.mark.parametrize("path", ["requirements.lock", "requirements-uv.lock", "docker/requirements.txt"])
def test_every_locked_pin_carries_a_hash(path: str) -> None:
    pins = read_pins(REPO / path)
    assert pins
    unhashed = sorted(name for name, pin in pins.items() if not pin.hashes)
    assert not unhashed, f"{path}: no --hash for {unhashed}; regenerate with `make lock`"


def test_make_venv_enforces_the_hashes() -> None:
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile[makefile.index("$(VENV)/.installed:") :].split("\n\n", 1)[0]
    installs = [line for line in recipe.splitlines() if "install" in line and " -r " in line]
    assert len(installs) == 2 and all("--require-hashes" in line for line in installs), installs


# What neuronx-distributed imports from transformers, transcribed from its sources at
# github.com/aws-neuron/neuronx-distributed tag v2.28.0 (commit 22cadad3, the source of the image's
# 0.17.26814+4b18de63, Neuron SDK 2.28.0; the same at fbac349b "Release 2.29"): pipeline/trace.py,
# modules/lora/{layer,model}.py, trainium_trainer/trainer.py, utils/{adamw_fp32_optim_params,model_utils,sampling}.py.
# (scripts/checkpoint_converter.py's AutoModelForCausalLM/AutoConfig is a script, not the library.)
# transformers 5 removed transformers.utils.fx.
NXD_TRANSFORMERS_IMPORTS = [
    ("transformers.utils.fx", "HFTracer"),
    ("transformers.pytorch_utils", "Conv1D"),
    ("transformers.trainer_pt_utils", "get_module_class_from_name"),
    ("transformers.utils.versions", "require_version"),
    ("transformers", "PreTrainedModel"),
    ("transformers", "PretrainedConfig"),
]


def test_the_locked_transformers_has_every_name_neuronx_distributed_imports() -> None:
    import importlib

    missing = []
    for module, name in NXD_TRANSFORMERS_IMPORTS:
        try:
            getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as error:
            missing.append(f"{module}.{name}: {error}")
    assert not missing, missing
