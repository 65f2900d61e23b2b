"""A run-built image is trusted only as re-derived: the registry's reference under the content-hash tag of this
run's sources, never what the build task's XCom says."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG

from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.neuron.images import check_trusted
from airflow_provider_trainium.operators.run_images import BuiltImageMismatchError, built_references, run_images
from tests.unit.operators.test_job_native_image import BuildXComs, RegistryHeld

HELD = "registry.example.com:5000/trainium@sha256:" + "a" * 64
ATTACKER = "docker.io/attacker/x:latest"


def dag_with_build(held: str = HELD):
    with DAG("built", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        RegistryHeld(task_id="build_image", held=held, held_labels={"base": "b"})
    return dag


def test_the_re_derived_image_is_trusted_with_the_registrys_labels():
    dag = dag_with_build()
    context = {"ti": BuildXComs({("build_image", "return_value"): HELD, ("build_image", "labels"): {"x": "y"}},
                                dag_id="built")}  # fmt: skip
    (image,) = run_images(context, dag)
    assert (image.reference, image.labels) == (HELD, {"base": "b"})  # the registry's labels, not the XCom's
    check_trusted(HELD, TrainiumConfig(), built_references(context, dag))


@pytest.mark.parametrize("xcom", [ATTACKER, "registry.example.com:5000/trainium@sha256:" + "b" * 64])
def test_an_edited_build_xcom_is_refused_naming_both(xcom):
    dag = dag_with_build()
    context = {"ti": BuildXComs({("build_image", "return_value"): xcom}, dag_id="built")}
    with pytest.raises(BuiltImageMismatchError) as err:
        built_references(context, dag)
    assert xcom in str(err.value) and HELD in str(err.value)
    assert isinstance(err.value, ValueError)  # prepare() turns it into a failure before any RunTask/SubmitJob
