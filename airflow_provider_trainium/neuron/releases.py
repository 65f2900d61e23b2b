"""The Neuron releases the provider knows: what each ships, which host drivers its runtime accepts, and
whether AWS still supports it for training.

The table is ``releases.toml`` beside this module (every value cites its document there). It answers three
questions before anything is paid for:

* which release an image carries (its runtime label, a DLC tag's ``sdkX.Y.Z``, or the release the project's
  own image is built on);
* whether a host's Neuron driver accepts that release's runtime (a mismatch fails ``nrt_init()`` at the
  job's first device use, after the instances were paid for);
* whether the release supports training on an instance family, and which runtime variables it deprecates;
* which training stack (``xla`` or ``native``, ``trainium_trainer.boundary.STACKS``) runs on which family
  (:func:`stack_problem`, :func:`auto_stack`): a stack trains on a family when a release of that stack that AWS
  has not ended training support for lists the family.

Pure data and string rules: no AWS client, no Airflow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

# the stack values (``auto`` and the stacks) belong to neuron.stack_names; they are importable from here too
from airflow_provider_trainium.neuron.stack_names import STACK_AUTO, STACK_CHOICES
from trainium_trainer import boundary

TABLE_PATH = Path(__file__).with_name("releases.toml")
#: The image label that records the Neuron runtime an image carries (docker/Dockerfile and docker/native/Dockerfile
#: set it).
RUNTIME_LABEL = "trainium.neuron.runtime.version"
#: The image label that records the Neuron SDK release an image is built on.
SDK_LABEL = "trainium.neuron.sdk.version"
_DLC_SDK = re.compile(r"-sdk(?P<sdk>\d+\.\d+\.\d+)(?:-|$)")
#: What ``auto`` picks, first that trains on the family: AWS names the native stack for new Trn2/Trn3 work
#: and keeps Trn1 on the XLA stack (docs/fidelity.md, "Which stack").
AUTO_PREFERENCE: tuple[str, ...] = (boundary.STACK_NATIVE, boundary.STACK_XLA)
#: ``training_support`` values under which a release still trains (a beta counts; ``unsupported`` does not).
TRAINING_OFFERED: frozenset[str] = frozenset({"supported", "beta"})


class NeuronDriverMismatchError(ValueError):
    """The host's Neuron driver rejects the image's Neuron runtime; the message names both and the fix."""


def version_key(version: str) -> tuple[int, ...]:
    """``2.32.31.0-0234f5ed2`` -> ``(2, 32, 31, 0)``: the numeric components before any build suffix."""
    head = re.match(r"^\d+(?:\.\d+)*", (version or "").strip())
    if head is None:
        raise ValueError(f"{version!r} is not a version number")
    return tuple(int(part) for part in head[0].split("."))


def within(version: str, oldest: str, newest: str | None) -> bool:
    """Whether ``version`` lies in ``[oldest, newest]``; a bound counts only as many components as it names
    (``newest = "2.28"`` admits every 2.28.x)."""
    key = version_key(version)
    low = version_key(oldest)
    if key[: len(low)] < low:
        return False
    if newest is None:
        return True
    high = version_key(newest)
    return key[: len(high)] <= high


@dataclass(frozen=True)
class NeuronRelease:
    """One Neuron SDK release as the image and the hosts see it."""

    version: str
    stack: str
    dlc_image: str
    dlc_tag: str
    python: str
    runtime: str
    collectives: str
    driver: str
    driver_oldest: str
    driver_newest: str | None
    compiler: str
    torch_neuronx: str
    neuronx_distributed: str
    torch: str
    transformers: str
    training_families: tuple[str, ...]
    training_support: str
    support_note: str
    deprecated_env: tuple[str, ...]
    sources: dict[str, str]

    @property
    def supported_for_training(self) -> bool:
        return self.training_support == "supported"

    @property
    def offers_training(self) -> bool:
        """Supported or in beta: a release AWS has not ended training on."""
        return self.training_support in TRAINING_OFFERED

    @property
    def dlc(self) -> str:
        """The training DLC, or ``""`` for a release AWS publishes none for."""
        return f"{self.dlc_image}:{self.dlc_tag}" if self.dlc_image and self.dlc_tag else ""

    @property
    def driver_range(self) -> str:
        return f"{self.driver_oldest} to {self.driver_newest}.x" if self.driver_newest else f"{self.driver_oldest}+"

    def accepts_driver(self, driver_version: str) -> bool:
        return within(driver_version, self.driver_oldest, self.driver_newest)

    def trains_on(self, instance_type: str) -> bool:
        return family(instance_type) in self.training_families


@dataclass(frozen=True)
class ReleaseTable:
    as_of: str
    image_release: str
    releases: dict[str, NeuronRelease]
    native_image_release: str = ""

    @property
    def image(self) -> NeuronRelease:
        """The release ``docker/Dockerfile`` builds on: the XLA image, and the one an unlabelled image is taken for."""
        return self.releases[self.image_release]

    def image_for(self, stack: str) -> NeuronRelease:
        """The release the project's image of ``stack`` builds on (``docker/Dockerfile`` for xla,
        ``docker/native/Dockerfile`` for native)."""
        versions = {boundary.STACK_XLA: self.image_release, boundary.STACK_NATIVE: self.native_image_release}
        version = versions.get(stack, "")
        if not version:
            raise ValueError(f"{TABLE_PATH.name} names no image release for stack {stack!r}")
        return self.releases[version]

    def stack_releases(self, stack: str, instance_type: str) -> list[NeuronRelease]:
        """The releases of ``stack`` that still train on ``instance_type``'s family, oldest first."""
        found = [
            r for r in self.releases.values() if r.stack == stack and r.offers_training and r.trains_on(instance_type)
        ]
        return sorted(found, key=lambda r: version_key(r.version))

    def by_runtime(self, runtime_version: str) -> NeuronRelease | None:
        """The release whose runtime is ``runtime_version`` (matched on its numeric components)."""
        key = version_key(runtime_version)
        for release in self.releases.values():
            known = version_key(release.runtime)
            if key[: len(known)] == known or known[: len(key)] == key:
                return release
        return None


def family(instance_type: str) -> str:
    """``trn1n.32xlarge`` -> ``trn1n``."""
    return instance_type.split(".", 1)[0]


def _release(entry: dict[str, Any]) -> NeuronRelease:
    return NeuronRelease(
        version=entry["version"],
        stack=entry["stack"],
        dlc_image=entry.get("dlc_image", ""),
        dlc_tag=entry.get("dlc_tag", ""),
        python=entry["python"],
        runtime=entry["runtime"],
        collectives=entry["collectives"],
        driver=entry["driver"],
        driver_oldest=entry["driver_oldest"],
        driver_newest=entry.get("driver_newest") or None,
        compiler=entry["compiler"],
        torch_neuronx=entry["torch_neuronx"],
        neuronx_distributed=entry.get("neuronx_distributed", ""),
        torch=entry["torch"],
        transformers=entry.get("transformers", ""),
        training_families=tuple(entry["training_families"]),
        training_support=entry["training_support"],
        support_note=entry["support_note"],
        deprecated_env=tuple(entry.get("deprecated_env", ())),
        sources=dict(entry["sources"]),
    )


@cache
def table() -> ReleaseTable:
    """``releases.toml``, read and checked on first use (never at import: DAG files import none of this)."""
    import tomllib

    data = tomllib.loads(TABLE_PATH.read_text())
    releases = {entry["version"]: _release(entry) for entry in data["release"]}
    for key, stack in (("image_release", boundary.STACK_XLA), ("native_image_release", boundary.STACK_NATIVE)):
        version = data.get(key, "")
        if key == "image_release" and version not in releases:
            raise ValueError(f"{TABLE_PATH.name}: image_release {version} is not in the table")
        if version and (version not in releases or releases[version].stack != stack):
            raise ValueError(f"{TABLE_PATH.name}: {key} {version} must be a {stack!r} release of the table")
    for release in releases.values():
        if release.stack not in boundary.STACKS:
            raise ValueError(
                f"{TABLE_PATH.name}: release {release.version} has stack {release.stack!r}, "
                f"not one of {boundary.STACKS}"
            )
    return ReleaseTable(
        as_of=data["as_of"],
        image_release=data["image_release"],
        releases=releases,
        native_image_release=data.get("native_image_release", ""),
    )


@dataclass(frozen=True)
class ImageRuntime:
    """The Neuron runtime an image carries, and how that was worked out."""

    runtime: str
    release: NeuronRelease | None
    how: str


def image_runtime(image: str | None, labels: dict[str, str] | None = None) -> ImageRuntime:
    """What runtime ``image`` carries: its runtime label when known, else its SDK label or the release its DLC
    tag names, else the release ``docker/Dockerfile`` is built on (an image reference says nothing more)."""
    releases = table()
    labels = labels or {}
    if labels.get(RUNTIME_LABEL):
        runtime = labels[RUNTIME_LABEL]
        return ImageRuntime(runtime, releases.by_runtime(runtime), f"image label {RUNTIME_LABEL}")
    if labels.get(SDK_LABEL) in releases.releases:
        release = releases.releases[labels[SDK_LABEL]]
        return ImageRuntime(release.runtime, release, f"Neuron {release.version} (image label {SDK_LABEL})")
    match = _DLC_SDK.search((image or "").rsplit("/", 1)[-1])
    if match and match["sdk"] in releases.releases:
        release = releases.releases[match["sdk"]]
        return ImageRuntime(release.runtime, release, f"Neuron {release.version} (the image tag's sdk{match['sdk']})")
    release = releases.image
    return ImageRuntime(release.runtime, release, f"Neuron {release.version} (the release docker/Dockerfile builds on)")


def driver_problem(image: str | None, driver_version: str | None, labels: dict[str, str] | None = None) -> str | None:
    """Why the host driver ``driver_version`` cannot run ``image``'s runtime, or None when it can (or when the
    driver is unknown: the caller warns about that)."""
    if not driver_version:
        return None
    found = image_runtime(image, labels)
    release = found.release
    if release is None:
        return None  # a runtime the table does not know: nothing to compare against
    if release.accepts_driver(driver_version):
        return None
    alternatives = sorted(
        (
            r
            for r in table().releases.values()
            if r.supported_for_training and r.stack == release.stack and r.accepts_driver(driver_version)
        ),
        key=lambda r: version_key(r.version),
    )
    fix = (
        f"pin aws-neuronx-dkms {release.driver} on the hosts (the stacks' NeuronDriverVersion parameter, the Batch "
        "stack's NativeNeuronDriverVersion on Trn2/Trn3, then `airflow trainium configure`)"
    )
    if alternatives:
        fix += f", or run an image of Neuron {alternatives[-1].version} (runtime {alternatives[-1].runtime})"
    return (
        f"the hosts' Neuron driver {driver_version} rejects the image's Neuron runtime {found.runtime} "
        f"({found.how}; that runtime accepts drivers {release.driver_range}): nrt_init() would fail at the job's "
        f"first device use. Fix: {fix}"
    )


def check_driver(image: str | None, driver_version: str | None, labels: dict[str, str] | None = None) -> None:
    problem = driver_problem(image, driver_version, labels)
    if problem:
        raise NeuronDriverMismatchError(problem)


def unchecked_driver_warning(image: str | None, labels: dict[str, str] | None = None) -> str:
    """What to say when the connection does not know its hosts' driver: the image's runtime goes unchecked."""
    found = image_runtime(image, labels)
    return (
        "the trainium connection does not say which Neuron driver its hosts run (neuron_driver_versions for the "
        "job's instance type, or neuron_driver_version; `airflow trainium configure` writes them from the stacks): "
        "the image's Neuron runtime "
        f"{found.runtime} ({found.how}) is not checked against it"
    )


def driver_check(image: str | None, driver_version: str | None, labels: dict[str, str] | None = None) -> str | None:
    """Raise on a driver the image's runtime cannot use; a warning to log when the driver is unknown, else None."""
    if not driver_version:
        return unchecked_driver_warning(image, labels)
    check_driver(image, driver_version, labels)
    return None


def family_problem(image: str | None, instance_type: str, labels: dict[str, str] | None = None) -> str | None:
    """Why ``image``'s release does not train on ``instance_type``'s family, or None when it does."""
    release = image_runtime(image, labels).release
    if release is None or release.trains_on(instance_type):
        return None
    return (
        f"Neuron {release.version} ({release.stack} stack) does not support training on {family(instance_type)} "
        f"({instance_type}); it trains on {', '.join(release.training_families)}"
    )


def stack_problem(stack: str, instance_type: str) -> str | None:
    """Why ``stack`` cannot train on ``instance_type``'s family, or None when the release table says it can.

    The message names ``stack``, the family and the stack to use instead (or ``auto``, which picks it).
    """
    if stack not in boundary.STACKS:
        return f"stack {stack!r} is not one of: {', '.join(STACK_CHOICES)}"
    releases = table()
    if releases.stack_releases(stack, instance_type):
        return None
    others = [s for s in AUTO_PREFERENCE if s != stack and releases.stack_releases(s, instance_type)]
    fix = f"use stack {others[0]!r} (or 'auto')" if others else "no stack in the release table trains there"
    offered = sorted(
        {f for r in releases.releases.values() if r.stack == stack and r.offers_training for f in r.training_families}
    )
    where = f"it trains on {', '.join(offered)}" if offered else "no release of it still trains"
    return (
        f"stack {stack!r} does not train on {family(instance_type)} ({instance_type}): in the Neuron release table "
        f"{where}; {fix}"
    )


def image_stack(image: str | None, labels: dict[str, str] | None = None) -> str | None:
    """The stack ``image``'s Neuron release carries, by its ``labels`` (the runtime label both project images set)
    or its DLC tag; the XLA image's without either. None when the table does not know the release."""
    release = image_runtime(image, labels).release
    return release.stack if release else None


def auto_stack(instance_type: str, image: str | None = None, labels: dict[str, str] | None = None) -> str:
    """The stack ``auto`` means on ``instance_type``.

    With the ``image`` a job will run, the stack that image carries wins where it trains on the family: a Trn2
    job on the XLA image stays on XLA instead of asking that image for a native trainer it does not hold.
    Without one (local compute, a DAG's first check), the first of ``AUTO_PREFERENCE`` that trains on the
    family (``xla`` on Trn1, ``native`` on Trn2 and Trn3); ``xla`` where none does, which then fails its check.
    ``labels`` are the image's, when known (a build task of the run pushed them).
    """
    carried = image_stack(image, labels) if image else None
    if carried and table().stack_releases(carried, instance_type):
        return carried
    for stack in AUTO_PREFERENCE:
        if table().stack_releases(stack, instance_type):
            return stack
    return boundary.STACK_XLA


def image_stack_problem(stack: str, image: str | None, labels: dict[str, str] | None = None) -> str | None:
    """Why ``image`` (with its ``labels``, when known) cannot run a ``stack`` job (its release carries the other
    stack), or None."""
    carried = image_stack(image, labels) if image else None
    if carried is None or carried == stack:
        return None
    found = image_runtime(image, labels)
    return (
        f"stack {stack!r} needs an image of that stack, but {image} carries Neuron runtime {found.runtime} "
        f"({found.how}), a {carried!r} stack release: use stack {carried!r} (or 'auto') or an image of the "
        f"{stack!r} stack"
    )


def resolve_stack(
    stack: str | None, instance_type: str, image: str | None = None, labels: dict[str, str] | None = None
) -> str:
    """``stack`` as a job runs it: ``auto`` (or none) resolved for ``instance_type`` (and the ``image`` it runs,
    see :func:`auto_stack`); raise ValueError with :func:`stack_problem`'s message when the stack cannot train
    there."""
    chosen = auto_stack(instance_type, image, labels) if stack in (None, "", STACK_AUTO) else str(stack)
    problem = stack_problem(chosen, instance_type)
    if problem:
        raise ValueError(problem)
    return chosen
