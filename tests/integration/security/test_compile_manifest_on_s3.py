"""Compile-cache manifests on a moto S3 that enforces the base template's IAM policies (``iam_moto``): the job role
writes the compile cache but not the manifests, not even widened to ``s3:*`` (the template's explicit Deny); a
compile task, as the Airflow principal through an Airflow connection with ``endpoint_url``, records the cache a
job filled; a job then changes, deletes or adds an entry and the training job is refused (or allowed) before it is
submitted.

Cost: one moto process for the module (about 1 s to start and set up); the module runs in about 10 s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_provider_trainium import compile_manifest
from airflow_provider_trainium.compile_manifest import CompileCacheChanged
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.operators.compile import TrainiumCompileOperator
from airflow_provider_trainium.operators.training import TrainiumTrainingOperator
from tests.conftest import set_trainium_connection
from tests.integration.security import iam_moto
from tests.integration.security.iam_moto import IamS3, airflow_connection, denied
from tests.unit.operators.test_compile import JOB, finished
from tests.unit.operators.test_job import context
from trainium_trainer import boundary

#: What a Trainium trial leaves in an ``s3://`` cache: the Neuron persistent cache's entries.
ENTRIES = {"neuronxcc-2.21/MODULE_1+abc/model.neff": b"neff-1", "neuronxcc-2.21/MODULE_1+abc/model.done": b""}
NEFF = "neuronxcc-2.21/MODULE_1+abc/model.neff"


@pytest.fixture(scope="module")
def world() -> Iterator[IamS3]:
    yield from iam_moto.start({f"{iam_moto.PREFIX}/compile-manifests/seed.json": b"{}"})


def put(world: IamS3, who: str, uri: str, body: bytes) -> None:
    world.s3(who).put_object(Bucket=world.bucket, Key=uri.removeprefix(f"s3://{world.bucket}/"), Body=body)


@pytest.fixture
def recorded(world: IamS3, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A cache of its own that a job filled and Airflow recorded (as a compile task does after its trial)."""
    conn_id = airflow_connection(world, monkeypatch)
    cache = f"{world.root}/compile-cache/{request.node.name.replace('[', '-').rstrip(']')}"
    for name, body in ENTRIES.items():
        put(world, "job", f"{cache}/{name}", body)
    compile_manifest.record(world.root, cache, {"task_id": "compile"}, key="k1", aws_conn_id=conn_id)
    return cache


@pytest.mark.parametrize("who", ["job", "widened"])
@pytest.mark.parametrize("write", ["put", "copy", "multipart", "delete"])
def test_no_job_writes_the_compile_manifests_not_even_with_s3_everywhere(world, who, write):
    """The plain job role has no Allow there; the widened one (``s3:*`` on ``*``) meets the explicit Deny."""
    from tests.integration.security.test_job_role_on_s3 import WRITES

    key = world.key("compile-manifests", "seed.json")
    source = world.key("compile-cache", "source.bin")
    world.s3("airflow").put_object(Bucket=world.bucket, Key=source, Body=b"x")
    assert denied(WRITES[write], world.s3(who), world.bucket, key, source)
    assert world.s3("airflow").get_object(Bucket=world.bucket, Key=key)["Body"].read() == b"{}"


def test_the_job_role_writes_the_cache_itself(world):
    key = world.key("compile-cache", "d", "neuronxcc-2.21", "MODULE_9", "model.neff")
    world.s3("job").put_object(Bucket=world.bucket, Key=key, Body=b"neff")
    world.s3("job").delete_object(Bucket=world.bucket, Key=key)


def test_an_untouched_cache_and_one_a_job_added_to_pass(world, monkeypatch, recorded):
    conn_id = airflow_connection(world, monkeypatch)
    assert compile_manifest.verify(world.root, recorded, conn_id)[1] == compile_manifest.CacheChanges()
    put(world, "job", f"{recorded}/neuronxcc-2.21/MODULE_2+abc/model.neff", b"compiled at run time")
    changes = compile_manifest.verify(world.root, recorded, conn_id)[1]
    assert changes == compile_manifest.CacheChanges(added=("neuronxcc-2.21/MODULE_2+abc/model.neff",))


@pytest.mark.parametrize("attack", ["same size", "other size", "deleted"])
def test_an_entry_a_job_changed_or_deleted_is_refused_by_name(world, monkeypatch, recorded, attack):
    conn_id = airflow_connection(world, monkeypatch)
    if attack == "deleted":
        world.s3("job").delete_object(
            Bucket=world.bucket, Key=f"{recorded}/{NEFF}".removeprefix(f"s3://{world.bucket}/")
        )
    else:
        put(world, "job", f"{recorded}/{NEFF}", b"neff-2" if attack == "same size" else b"a planted NEFF")
    kind = "removed" if attack == "deleted" else "changed"
    with pytest.raises(CompileCacheChanged, match=rf"1 entry {kind} \({NEFF.replace('+', '[+]')}\)"):
        compile_manifest.verify(world.root, recorded, conn_id)


def test_a_compile_task_then_a_tampered_entry_refuses_the_training_job_before_submit(world, monkeypatch):
    """The whole path on S3: the compile task's trial (its job writes the entries with the job role), the task
    records the cache through the Airflow connection, a job replaces the NEFF, the training task is refused."""
    conn_id = airflow_connection(world, monkeypatch)
    cache = f"{world.root}/compile-cache/operators"
    set_trainium_connection(monkeypatch, artifact_root=world.root, aws_conn_id=conn_id,
                            allowed_input_prefixes=["s3://data-bucket"])  # fmt: skip
    compile_op = TrainiumCompileOperator(task_id="compile", compile_cache_uri=cache, **JOB)

    def trial() -> None:
        for name, body in ENTRIES.items():
            put(world, "job", f"{cache}/{name}", body)

    key = finished(compile_op, context(), while_running=trial)["cache_key"]
    manifest = compile_manifest.read_manifest(world.root, cache, conn_id)
    assert manifest is not None and set(manifest["keys"]) == {key} and sorted(manifest["entries"]) == sorted(ENTRIES)

    training = TrainiumTrainingOperator(task_id="train", compile_cache_uri=cache, **JOB)
    assert training.prepare(context()).spec.env[boundary.ENV_COMPILE_CACHE_URI] == cache  # untouched: passes
    put(world, "job", f"{cache}/{NEFF}", b"a planted NEFF")
    monkeypatch.setattr(LocalBackend, "submit", lambda *args: pytest.fail("a training job was submitted"))
    training = TrainiumTrainingOperator(task_id="train", compile_cache_uri=cache, **JOB)
    training.pre_execute(context())
    with pytest.raises(AirflowFailException, match=r"1 entry changed \(neuronxcc-2\.21/MODULE_1\+abc/model\.neff\)"):
        training.execute(context())
