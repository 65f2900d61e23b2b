"""The Neuron releases the provider knows: what each ships, which host drivers its runtime accepts, and
whether AWS still supports it for training.

The table is ``releases.toml`` beside this module (every value cites its document there). It answers three
questions before anything is paid for:

* which release an image carries (its runtime label, a DLC tag's ``sdkX.Y.Z``, or the release the project's
  own image is built on);
* whether a host's Neuron driver accepts that release's runtime (a mismatch fails ``nrt_init()`` at the
  job's first device use, after the instances were paid for);
* whether the release supports training on an instance family, and which runtime variables it deprecates.

Pure data and string rules: no AWS client, no Airflow.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TABLE_PATH = Path(__file__).with_name("releases.toml")
#: The image label that records the Neuron runtime an image carries (docker/Dockerfile sets it).
RUNTIME_LABEL = "trainium.neuron.runtime.version"
#: The image label that records the Neuron SDK release an image is built on.
SDK_LABEL = "trainium.neuron.sdk.version"
_DLC_SDK = re.compile(r"-sdk(?P<sdk>\d+\.\d+\.\d+)(?:-|$)")


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
    def dlc(self) -> str:
        return f"{self.dlc_image}:{self.dlc_tag}"

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

    @property
    def image(self) -> NeuronRelease:
        """The release ``docker/Dockerfile`` builds on (and so every image NeuronImageBuildOperator builds)."""
        return self.releases[self.image_release]

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
        dlc_image=entry["dlc_image"],
        dlc_tag=entry["dlc_tag"],
        python=entry["python"],
        runtime=entry["runtime"],
        collectives=entry["collectives"],
        driver=entry["driver"],
        driver_oldest=entry["driver_oldest"],
        driver_newest=entry.get("driver_newest") or None,
        compiler=entry["compiler"],
        torch_neuronx=entry["torch_neuronx"],
        neuronx_distributed=entry["neuronx_distributed"],
        torch=entry["torch"],
        transformers=entry["transformers"],
        training_families=tuple(entry["training_families"]),
        training_support=entry["training_support"],
        support_note=entry["support_note"],
        deprecated_env=tuple(entry.get("deprecated_env", ())),
        sources=dict(entry["sources"]),
    )


@cache
def table() -> ReleaseTable:
    data = tomllib.loads(TABLE_PATH.read_text())
    releases = {entry["version"]: _release(entry) for entry in data["release"]}
    if data["image_release"] not in releases:
        raise ValueError(f"{TABLE_PATH.name}: image_release {data['image_release']} is not in the table")
    return ReleaseTable(as_of=data["as_of"], image_release=data["image_release"], releases=releases)


@dataclass(frozen=True)
class ImageRuntime:
    """The Neuron runtime an image carries, and how that was worked out."""

    runtime: str
    release: NeuronRelease | None
    how: str


def image_runtime(image: str | None, labels: dict[str, str] | None = None) -> ImageRuntime:
    """What runtime ``image`` carries: its runtime label when known, else the release its DLC tag names, else
    the release the project's own image is built on (``docker/Dockerfile``: every image it builds)."""
    releases = table()
    labels = labels or {}
    if labels.get(RUNTIME_LABEL):
        runtime = labels[RUNTIME_LABEL]
        return ImageRuntime(runtime, releases.by_runtime(runtime), f"image label {RUNTIME_LABEL}")
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
        f"pin aws-neuronx-dkms {release.driver} on the hosts (the stacks' NeuronDriverVersion parameter, then "
        "`airflow trainium configure`)"
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


def unchecked_driver_warning(image: str | None) -> str:
    """What to say when the connection does not know its hosts' driver: the image's runtime goes unchecked."""
    found = image_runtime(image)
    return (
        "the trainium connection does not say which Neuron driver its hosts run (neuron_driver_version; "
        "`airflow trainium configure` writes it from the stacks): the image's Neuron runtime "
        f"{found.runtime} ({found.how}) is not checked against it"
    )


def driver_check(image: str | None, driver_version: str | None) -> str | None:
    """Raise on a driver the image's runtime cannot use; a warning to log when the driver is unknown, else None."""
    if not driver_version:
        return unchecked_driver_warning(image)
    check_driver(image, driver_version)
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
