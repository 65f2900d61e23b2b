"""The Neuron release table: every value sourced, and the rules that refuse a host driver, an instance family
or a runtime variable an image's release cannot take."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_trainium.neuron import launch, releases
from airflow_provider_trainium.neuron.releases import (
    RUNTIME_LABEL,
    auto_stack,
    driver_problem,
    family_problem,
    image_runtime,
    resolve_stack,
    stack_problem,
    table,
    within,
)
from airflow_provider_trainium.neuron.spec import JobSpec

SOURCED = ("dlc_tag", "runtime", "driver", "driver_oldest", "driver_newest", "torch_neuronx", "training_support")
DLC_2_30 = "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04"


@pytest.mark.parametrize("version", sorted(table().releases))
def test_every_release_names_the_document_behind_its_values(version: str) -> None:
    release = table().releases[version]
    missing = [name for name in SOURCED if not release.sources.get(name)]
    assert not missing, f"{version}: no source for {missing}"
    assert release.training_support in ("supported", "beta", "unsupported")
    assert release.stack in ("xla", "native")
    if release.stack == "xla":
        assert release.dlc_tag.endswith("ubuntu24.04") and f"sdk{version}" in release.dlc_tag
    else:  # AWS publishes no training DLC for the native stack
        assert release.dlc == "" and not release.neuronx_distributed
    assert all(isinstance(getattr(release, f.name), str) for f in dataclasses.fields(release) if f.type == "str")


def test_the_image_release_is_the_one_aws_supports_for_xla_training() -> None:
    image = table().image
    assert image.supported_for_training and "stay on Neuron SDK 2.28" in image.support_note
    assert not table().releases["2.30.0"].supported_for_training


def test_bounds_count_only_the_components_they_name() -> None:
    assert within("2.28.9.0", "2.26", "2.28") and within("2.26.5.0", "2.26", "2.28")
    assert not within("2.29.0.0", "2.26", "2.28") and not within("2.25.4.0", "2.26", "2.28")
    assert within("3.0.0", "2.27", None)
    with pytest.raises(ValueError, match="not a version"):
        within("latest", "2.26", "2.28")


def test_the_runtime_comes_from_the_label_then_the_dlc_tag_then_the_project_image() -> None:
    assert image_runtime("x@sha256:" + "0" * 64, {RUNTIME_LABEL: "2.32.31.0"}).release.version == "2.30.0"
    assert image_runtime(DLC_2_30).release.version == "2.30.0"
    own = image_runtime("123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "1" * 64)
    assert own.release == table().image and "docker/Dockerfile" in own.how
    assert image_runtime(None).runtime == table().image.runtime


def test_the_release_driver_passes_and_its_neighbours_outside_the_range_do_not() -> None:
    image = table().image
    assert driver_problem(None, image.driver) is None
    assert driver_problem(None, None) is None  # unknown: the caller warns
    newest_major, newest_minor = (int(p) for p in image.driver_newest.split("."))
    too_new = f"{newest_major}.{newest_minor + 1}.0.0"
    problem = driver_problem(None, too_new)
    assert problem and f"Neuron driver {too_new}" in problem and image.runtime in problem
    assert f"pin aws-neuronx-dkms {image.driver}" in problem and "nrt_init()" in problem
    oldest_major, oldest_minor = (int(p) for p in image.driver_oldest.split("."))
    assert driver_problem(None, f"{oldest_major}.{oldest_minor - 1}.9.0")


def test_a_mismatch_suggests_a_supported_release_that_the_driver_accepts() -> None:
    """A 2.30 image on the 2.28 release's driver: runtime 2.32 needs driver 2.27+; the 2.28 image would run."""
    problem = driver_problem(DLC_2_30, table().image.driver)
    assert problem and "or run an image of Neuron 2.28.0" in problem
    with pytest.raises(releases.NeuronDriverMismatchError):
        releases.check_driver(DLC_2_30, table().image.driver)


def test_family_rule() -> None:
    assert family_problem(None, "trn1.32xlarge") is None and family_problem(None, "trn2.48xlarge") is None
    problem = family_problem(None, "trn3.48xlarge")
    assert problem and "does not support training on trn3" in problem


def test_runtime_variables_a_release_deprecates_are_not_preset() -> None:
    """Runtime 2.32 (Neuron 2.30) deprecates NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS; 2.30 (Neuron 2.28) has it."""
    name = "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS"
    assert name in table().releases["2.30.0"].deprecated_env
    own = JobSpec(name="job", entry_point="trainium_trainer.allreduce", image=None)
    assert launch.job_environment(own)[name] == "3"
    assert name not in launch.job_environment(dataclasses.replace(own, image=DLC_2_30))


def test_the_torchneuron_release_is_a_beta_of_the_native_stack_on_trn2_and_trn3_only() -> None:
    """Neuron 2.33.1 (release notes: new runtime-lib, collectives and dkms; every other package 2.33.0's)."""
    native = table().image_for("native")
    assert native.version == "2.33.1"
    assert (native.stack, native.training_support, native.training_families) == ("native", "beta", ("trn2", "trn3"))
    assert native.torch_neuronx.startswith("2.14.3.0") and native.torch.startswith("2.14")
    assert (native.runtime, native.collectives, native.driver) == ("2.35.33.0", "2.35.49.0", "2.31.8.0")
    assert native.offers_training and not native.supported_for_training


def test_the_release_before_the_patch_stays_so_its_images_are_still_native() -> None:
    """An image built on 2.33.0 (runtime label 2.35.30.0) is still of the native stack, and the two releases share
    everything but the runtime, collectives and driver, whose drivers each runtime accepts (the table's guess)."""
    before, patch = table().releases["2.33.0"], table().image_for("native")
    assert (before.stack, before.runtime, before.driver) == ("native", "2.35.30.0", "2.31.7.0")
    assert image_runtime("x@sha256:" + "0" * 64, {RUNTIME_LABEL: "2.35.30.0"}).release == before
    same = ("compiler", "torch_neuronx", "torch", "python", "training_families", "training_support")
    assert [getattr(before, f) for f in same] == [getattr(patch, f) for f in same]
    assert before.accepts_driver(patch.driver) and patch.accepts_driver(before.driver)


@pytest.mark.parametrize(
    ("instance_type", "auto"),
    [("trn1.2xlarge", "xla"), ("trn1.32xlarge", "xla"), ("trn1n.32xlarge", "xla"), ("trn2.48xlarge", "native"),
     ("trn3.48xlarge", "native")],
)  # fmt: skip
def test_auto_is_xla_on_trn1_and_native_on_trn2_and_trn3(instance_type: str, auto: str) -> None:
    assert auto_stack(instance_type) == auto
    assert stack_problem(auto, instance_type) is None
    assert resolve_stack("auto", instance_type) == resolve_stack(None, instance_type) == auto


@pytest.mark.parametrize(
    ("stack", "instance_type", "family", "instead"),
    [("native", "trn1.32xlarge", "trn1", "xla"), ("native", "trn1n.32xlarge", "trn1n", "xla"),
     ("xla", "trn3.48xlarge", "trn3", "native")],
)  # fmt: skip
def test_a_stack_the_table_has_no_release_of_for_the_family_is_refused_naming_stack_family_and_choice(
    stack: str, instance_type: str, family: str, instead: str
) -> None:
    problem = stack_problem(stack, instance_type)
    assert problem and problem.startswith(f"stack {stack!r} does not train on {family} ({instance_type})")
    assert f"use stack {instead!r}" in problem
    with pytest.raises(ValueError, match=f"stack {stack!r} does not train on {family}"):
        resolve_stack(stack, instance_type)


def test_xla_stays_allowed_on_trn2_because_its_supported_release_trains_there() -> None:
    assert stack_problem("xla", "trn2.48xlarge") is None
    assert [r.version for r in table().stack_releases("xla", "trn2.48xlarge")] == ["2.28.0"]  # 2.30.0 is unsupported


def test_an_unknown_stack_names_the_choices() -> None:
    assert stack_problem("jax", "trn2.48xlarge") == "stack 'jax' is not one of: auto, xla, native"


def test_the_rule_reads_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table whose native release also listed trn1 would let native run there: the rule is the table's."""
    current = table()
    version = current.native_image_release
    native = dataclasses.replace(current.releases[version], training_families=("trn1", "trn2", "trn3"))
    monkeypatch.setattr(
        releases, "table", lambda: dataclasses.replace(current, releases={**current.releases, version: native})
    )
    assert stack_problem("native", "trn1.32xlarge") is None


def test_auto_keeps_the_stack_the_jobs_image_carries_where_it_trains() -> None:
    from airflow_provider_trainium.neuron.releases import image_stack, image_stack_problem

    own = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "e" * 64  # no label: docker/'s release
    assert image_stack(DLC_2_30) == "xla" and image_stack(own) == "xla"
    # Trn2 on the XLA image stays on XLA (that image holds no native trainer); without an image, native
    assert auto_stack("trn2.48xlarge", DLC_2_30) == "xla" and auto_stack("trn2.48xlarge") == "native"
    # an image whose stack cannot train on the family does not decide: Trn3 is native whatever the image
    assert auto_stack("trn3.48xlarge", DLC_2_30) == "native"
    problem = image_stack_problem("native", DLC_2_30)
    assert (
        problem and problem.startswith("stack 'native' needs an image of that stack") and "use stack 'xla'" in problem
    )
    assert image_stack_problem("xla", DLC_2_30) is None and image_stack_problem("native", None) is None
