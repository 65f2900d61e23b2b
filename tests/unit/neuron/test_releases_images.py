"""Which stack an image carries, told from its labels: the native image must not pass for the XLA one."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.neuron.releases import (
    RUNTIME_LABEL,
    SDK_LABEL,
    driver_problem,
    image_runtime,
    image_stack,
    table,
)

NATIVE_REFERENCE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "a" * 64


def test_each_stack_has_an_image_release_of_that_stack() -> None:
    releases = table()
    assert releases.image_for("xla") is releases.image and releases.image.stack == "xla"
    native = releases.image_for("native")
    assert (native.version, native.stack) == ("2.33.1", "native")
    with pytest.raises(ValueError, match="no image release for stack 'tpu'"):
        releases.image_for("tpu")


def test_the_native_images_runtime_label_makes_it_native() -> None:
    labels = {RUNTIME_LABEL: table().image_for("native").runtime}
    assert image_stack(NATIVE_REFERENCE, labels) == "native"
    found = image_runtime(NATIVE_REFERENCE, labels)
    assert found.release is not None and found.release.version == "2.33.1"
    # an image built on the release before the patch (runtime 2.35.30.0) is native too, and judged as 2.33.0
    before = image_runtime(NATIVE_REFERENCE, {RUNTIME_LABEL: "2.35.30.0"})
    assert before.release is not None and before.release.version == "2.33.0"
    assert image_stack(NATIVE_REFERENCE, {RUNTIME_LABEL: "2.35.30.0"}) == "native"


def test_without_labels_a_bare_reference_is_taken_for_the_xla_image() -> None:
    assert image_stack(NATIVE_REFERENCE) == "xla"
    assert image_stack(NATIVE_REFERENCE, {RUNTIME_LABEL: table().image.runtime}) == "xla"


def test_the_sdk_label_decides_when_the_runtime_label_is_missing() -> None:
    assert image_stack(NATIVE_REFERENCE, {SDK_LABEL: "2.33.1"}) == "native"
    assert image_stack(NATIVE_REFERENCE, {SDK_LABEL: "2.33.0"}) == "native"
    assert image_stack(NATIVE_REFERENCE, {SDK_LABEL: "9.99.0"}) == "xla"  # unknown release: the fallback


def test_the_hosts_driver_is_judged_against_the_native_runtime_by_its_label() -> None:
    native = table().image_for("native")
    labels = {RUNTIME_LABEL: native.runtime}
    # the native release's own driver is fine for its runtime, and too new for the XLA image's
    assert driver_problem(NATIVE_REFERENCE, native.driver, labels) is None
    assert driver_problem(NATIVE_REFERENCE, native.driver) is not None
