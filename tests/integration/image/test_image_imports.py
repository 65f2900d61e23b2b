"""The image is the environment: whatever a trainer module imports, the image that runs it installs.

Every module of ``trainium_trainer`` is an entry point somewhere (the DAGs' jobs, ``@task.trainium``'s function
runner, the launcher, user scripts calling ``track``), so each image is checked against every module it can
run, following the imports inside functions too (a lazy import runs on some path). A third-party import must
be in the image's installed set (its requirements files, plus what its base installs), be a package of the
Neuron repository (unreachable from CI; the trainer guards those), or be the other stack's runtime, which the
versions file names under ``[not_installed]`` and the stack's own CPU lane runs without.

Read from the files, not from a build: the CPU test environments install from the locks, so only this test
sees what the images ship.
"""

from __future__ import annotations

import sys
import tomllib
from dataclasses import dataclass
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import pytest

from tests.integration.image.conftest import canonical, read_pins, requirement_names
from tests.source_imports import ROOT, imported_names, owner, package_modules

TRAINER = "trainium_trainer"


@dataclass(frozen=True)
class Image:
    dockerfile: str
    versions: Path
    requirements: tuple[Path, ...]  # name==version files the image installs
    base_requirements: tuple[Path, ...] = ()  # what its base image installs, by name
    cpu_lock: Path | None = None  # the stack's CPU test environment


XLA = Image(
    "docker/Dockerfile",
    ROOT / "docker" / "neuron-versions.toml",
    (ROOT / "docker" / "requirements.txt", ROOT / "docker" / "requirements-neuron.txt"),
    (ROOT / "docker" / "requirements-base.txt",),
    ROOT / "requirements.lock",
)
NATIVE = Image(
    "docker/native/Dockerfile",
    ROOT / "docker" / "native" / "neuron-versions.toml",
    tuple(ROOT / "docker" / "native" / f"requirements{part}.txt" for part in ("", "-torch", "-neuron")),
    cpu_lock=ROOT / "requirements-native.lock",
)
IMAGES = {"xla": XLA, "native": NATIVE}


def versions(image: Image) -> dict[str, Any]:
    return tomllib.loads(image.versions.read_text())


def neuron_repository_only() -> set[str]:
    """Packages only the Neuron pip repository serves, as either versions file names them (``[neuron.*]``)."""
    return {canonical(name) for image in IMAGES.values() for name in versions(image).get("neuron", {})}


def installed(image: Image) -> set[str]:
    """Distributions the image has: its requirements files, what its base installs and the versions file's
    packages that come with the base (``image = "base"``)."""
    names = {name for path in image.requirements for name in read_pins(path)}
    names |= {name for path in image.base_requirements for name in requirement_names(path)}
    from_base = {n for n, entry in versions(image).get("pypi", {}).items() if entry.get("image") == "base"}
    return names | {canonical(n) for n in from_base}


def other_stack(image: Image) -> set[str]:
    """The other stack's runtime, which this image leaves out on purpose (``[not_installed.*]`` with ``stack``)."""
    return {canonical(n) for n, entry in versions(image).get("not_installed", {}).items() if entry.get("stack")}


def distribution(module: str, known: dict[str, list[str]] = packages_distributions()) -> str:  # noqa: B008
    """The distribution a top-level module comes from: this environment's metadata, else the module's own name
    (``torch_neuronx`` is ``torch-neuronx``) for packages this environment does not have."""
    return canonical(known.get(module, [module])[0])


def third_party_imports(skip: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """distribution -> ``module:line`` of each trainer import of it, over every trainer module not under ``skip``."""
    modules = package_modules(TRAINER)
    found: dict[str, set[str]] = {}
    for name, path in modules.items():
        if name.startswith(skip):
            continue
        for imported, line in imported_names(path):
            top = imported.split(".", 1)[0]
            if top in (TRAINER, "__future__") or top in sys.stdlib_module_names or owner(imported, set(modules)):
                continue
            found.setdefault(distribution(top), set()).add(f"{name}:{line}")
    return found


@pytest.mark.parametrize("stack", IMAGES)
def test_every_trainer_import_resolves_in_the_image_that_runs_it(stack: str) -> None:
    image = IMAGES[stack]
    not_run = tuple(versions(image).get("trainer", {}).get("not_run", []))
    allowed = installed(image) | neuron_repository_only() | other_stack(image)
    missing = {dist: sorted(where)[:3] for dist, where in third_party_imports(not_run).items() if dist not in allowed}
    assert missing == {}, f"{image.dockerfile} does not install what the trainer imports: {missing}"


@pytest.mark.parametrize("stack", IMAGES)
def test_what_an_image_leaves_to_the_other_stack_its_own_cpu_lane_lacks_too(stack: str) -> None:
    """The exemption is earned: the stack's CPU test lane runs every one of its entry points without it."""
    image = IMAGES[stack]
    assert image.cpu_lock is not None
    assert other_stack(image).isdisjoint(read_pins(image.cpu_lock)), image.cpu_lock.name


def test_the_image_a_stack_never_runs_is_named_with_why() -> None:
    """A trainer package left out of an image's check names the rule that keeps it off that image."""
    for image in IMAGES.values():
        trainer = versions(image).get("trainer", {})
        for package in trainer.get("not_run", []):
            assert (ROOT / Path(*package.split("."))).is_dir(), package
            assert trainer.get("source"), f"{image.versions.name}: [trainer] not_run needs a source"
