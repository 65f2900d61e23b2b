"""What a job can write on S3 with the job role's policy exactly as ``cloudformation/base.yaml`` writes it, acted
out on a moto S3 that enforces IAM (``iam_moto``), not read from the template's text.

A job writes its own outputs, checkpoints, compile cache, data and llama prefixes, and reads the artifact prefix;
it cannot write the registry (``models/``: versions and aliases), the image-build contexts, the code bundles,
anything outside the prefix, or the bucket's settings. Airflow, with the published Airflow policy, writes the
registry. The one job role is shared by every run, so a job *can* write another run's evaluation output and the
shared hold-out sets (under ``data/`` and ``llama/``): what keeps a forged verdict from promoting is its seal
(``registry.seal``), which the verdict test plays out through the provider's own verdict reader, over this S3, as
Airflow; what keeps a swapped hold-out set from counting is the manifest its data job sealed (``registry.holdout``),
which the last test plays out the same way. The plan
record, which only Airflow writes though it lies under ``runs/``, is kept from jobs by an explicit Deny.

Cost: one moto process for the module (about 1 s to start and set up); the module runs in about 6 s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import pytest

from airflow_provider_trainium.compute.naming import job_name, run_key
from airflow_provider_trainium.registry.seal import job_key
from airflow_provider_trainium.registry.verdict import VerdictError, check_verdict, read_verdict
from tests.integration.security import iam_moto
from tests.integration.security.iam_moto import IamS3, airflow_connection, denied
from trainium_trainer import boundary

DAG = "trainium_mnist"
RUN = "scheduled__2026-01-02T00:00:00+00:00"
OTHER_RUN = "manual__2026-01-03T00:00:00+00:00"
MODEL_FILES = {"model.safetensors": b"\x02" * 64, "config.json": b"{}"}

#: Objects that exist before any job runs: what Airflow wrote (registry, contexts, bundles), what lies outside
#: the artifact prefix, and the shared hold-out set.
REGISTRY_MANIFEST = "models/mnist-mlp/versions/1/manifest.json"
REGISTRY_ALIAS = "models/mnist-mlp/aliases/latest.json"
AIRFLOW_ONLY = {
    REGISTRY_MANIFEST: b'{"version": 1}',
    REGISTRY_ALIAS: b'{"version": 1}',
    "models/mnist-mlp/aliases/latest.history/00000001.json": b'{"version": 1}',
    "image-contexts/trainer/context.tar.gz": b"context",
    "code/0123abcd/bundle.tar.gz": b"bundle",
}
OUTSIDE = {"other-team/model.bin": b"theirs", "root.txt": b"root", "trainium-shadow/runs/x/verdict.json": b"{}"}
HOLDOUT = "data/mnist/holdout.npz"


def run_prefix(run_id: str, task_id: str) -> str:
    return f"runs/{DAG}/{run_key(run_id)}/{task_id}"


@pytest.fixture(scope="module")
def world() -> Iterator[IamS3]:
    seed = {f"{iam_moto.PREFIX}/{k}": v for k, v in {**AIRFLOW_ONLY, HOLDOUT: b"holdout"}.items()}
    seed |= OUTSIDE
    seed |= {f"{iam_moto.PREFIX}/{run_prefix(RUN, 'train')}/model/{name}": body for name, body in MODEL_FILES.items()}
    yield from iam_moto.start(seed)


def body(world: IamS3, key: str) -> bytes:
    """The object's bytes, read as Airflow."""
    return world.s3("airflow").get_object(Bucket=world.bucket, Key=key)["Body"].read()


# -------------------------------------------------------------------------------- where a job writes


@pytest.mark.parametrize(
    "where",
    [f"{run_prefix(RUN, 'train')}/model/extra.bin", f"{run_prefix(RUN, 'evaluate')}/verdict.json",
     f"checkpoints/{DAG}/{run_key(RUN)}/train/step-100.pt", "compile-cache/neuronxcc-2.21/MODULE_1/model.neff",
     "data/mnist/tokenized/shard-0.bin", "llama/tiny/tokenizer.json"],
)  # fmt: skip
def test_a_job_writes_reads_and_deletes_where_jobs_write(world, where):
    job, key = world.s3("job"), world.key(where)
    job.put_object(Bucket=world.bucket, Key=key, Body=b"job")
    assert job.get_object(Bucket=world.bucket, Key=key)["Body"].read() == b"job"
    job.delete_object(Bucket=world.bucket, Key=key)


def test_a_job_uploads_a_large_checkpoint_in_parts(world):
    job, key = world.s3("job"), world.key(f"checkpoints/{DAG}/{run_key(RUN)}/train/step-200.pt")
    upload = job.create_multipart_upload(Bucket=world.bucket, Key=key)["UploadId"]
    part = job.upload_part(Bucket=world.bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"x" * 1024)
    parts = {"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]}
    job.complete_multipart_upload(Bucket=world.bucket, Key=key, UploadId=upload, MultipartUpload=parts)
    assert len(body(world, key)) == 1024


def test_a_job_reads_the_artifact_prefix_and_nothing_outside_it(world):
    job = world.s3("job")
    assert job.get_object(Bucket=world.bucket, Key=world.key(REGISTRY_MANIFEST))["Body"].read()  # a base model
    for key in OUTSIDE:
        assert denied(job.get_object, Bucket=world.bucket, Key=key), key


# -------------------------------------------------------------------------------- where only Airflow writes


def _put(job, bucket, key, source):
    job.put_object(Bucket=bucket, Key=key, Body=b"forged")


def _copy(job, bucket, key, source):  # a CopyObject is a PutObject of the destination
    job.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": source})


def _multipart(job, bucket, key, source):
    job.create_multipart_upload(Bucket=bucket, Key=key)


def _delete(job, bucket, key, source):
    job.delete_object(Bucket=bucket, Key=key)


def _tag(job, bucket, key, source):
    job.put_object_tagging(Bucket=bucket, Key=key, Tagging={"TagSet": [{"Key": "stage", "Value": "prod"}]})


WRITES = {"put": _put, "copy": _copy, "multipart": _multipart, "delete": _delete, "tag": _tag}


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("where", list(AIRFLOW_ONLY))
def test_a_job_cannot_write_the_registry_image_contexts_or_code_bundles(world, where, write):
    key, source = world.key(where), world.key(run_prefix(RUN, "train"), "model", "model.safetensors")
    assert denied(WRITES[write], world.s3("job"), world.bucket, key, source)
    assert body(world, key) == AIRFLOW_ONLY[where]


@pytest.mark.parametrize("write", ["put", "copy", "delete"])
@pytest.mark.parametrize("where", list(OUTSIDE))
def test_a_job_cannot_write_outside_the_artifact_prefix(world, where, write):
    source = world.key(run_prefix(RUN, "train"), "model", "model.safetensors")
    assert denied(WRITES[write], world.s3("job"), world.bucket, where, source)


def test_a_job_cannot_change_the_bucket(world):
    job, bucket = world.s3("job"), world.bucket
    assert denied(job.put_bucket_policy, Bucket=bucket, Policy=json.dumps(iam_moto.WIDE_OPEN))
    assert denied(job.put_bucket_versioning, Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
    assert denied(job.delete_bucket, Bucket=bucket)


def test_airflow_writes_the_registry_with_the_published_airflow_policy(world):
    airflow, key = world.s3("airflow"), world.key("models/mnist-mlp/versions/2/manifest.json")
    airflow.put_object(Bucket=world.bucket, Key=key, Body=b'{"version": 2}')
    airflow.delete_object(Bucket=world.bucket, Key=key)
    assert denied(airflow.put_object, Bucket=world.bucket, Key="other-team/model.bin", Body=b"x")


def test_the_denials_come_from_the_policy_a_widened_role_writes_the_registry(world):
    """The control: the same harness, with ``s3:*`` on ``*`` added to the job role, lets the job write everything
    the tests above deny; so they fail if the template's job role is ever widened so."""
    widened, key = world.s3("widened"), world.key("models/mnist-mlp/aliases/canary.json")
    widened.put_object(Bucket=world.bucket, Key=key, Body=b"{}")
    widened.put_object(Bucket=world.bucket, Key="other-team/canary.bin", Body=b"x")
    widened.delete_object(Bucket=world.bucket, Key=key)


# -------------------------------------------------------------------------------- what the one job role shares


@pytest.mark.parametrize(
    "where",
    [f"{run_prefix(OTHER_RUN, 'evaluate')}/verdict.json", f"checkpoints/{DAG}/{run_key(OTHER_RUN)}/train/step-100.pt",
     f"llama/{DAG}/{run_key(OTHER_RUN)}/tokenized/shard-0.bin", HOLDOUT],
)  # fmt: skip
def test_one_shared_job_role_writes_every_runs_prefixes_and_the_shared_hold_out_set(world, where):
    """The truth, not a wish: ECS and Batch jobs all run as the one job role, whose writes are scoped by prefix
    kind, not by run. A job of this run replaces another run's verdict, checkpoint, data, and the hold-out set
    every evaluation reads. The seals (the last test) are what stops a forged verdict."""
    job, key = world.s3("job"), world.key(where)
    job.put_object(Bucket=world.bucket, Key=key, Body=b"replaced by another run's job")
    assert body(world, key) == b"replaced by another run's job"


@pytest.mark.parametrize("write", ["put", "delete"])
def test_a_job_cannot_replace_a_runs_plan_record(world, write):
    key = world.key(run_prefix(OTHER_RUN, "check_params"), "plan.json")
    world.s3("airflow").put_object(Bucket=world.bucket, Key=key, Body=b'{"sealed": "by Airflow"}')
    assert denied(WRITES[write], world.s3("job"), world.bucket, key, key)


FINGERPRINT = boundary.model_fingerprint(
    (name, len(data), hashlib.sha256(data).hexdigest()) for name, data in MODEL_FILES.items()
)


def _verdict(model_uri: str, value: float, key_of_job: str) -> dict:
    """The record ``trainium_trainer.common.verdict.write_verdict`` writes for ``MODEL_FILES``, sealed."""
    record = {"format": boundary.VERDICT_FORMAT, "metric": "accuracy", "value": value, "threshold": 0.9,
              "comparison": ">=", "passed": boundary.passes(value, ">=", 0.9), "model_uri": model_uri,
              "model_fingerprint": FINGERPRINT, "model_files": len(MODEL_FILES),
              "details": {}}  # fmt: skip
    return {**record, boundary.SEAL_FIELD: boundary.seal(record, key_of_job)}


@pytest.mark.parametrize("attack", ["none", "passed flipped", "value raised", "another run's job"])
def test_a_verdict_forged_with_the_job_role_is_refused_by_airflow(world, monkeypatch, attack):
    """The forged-verdict attack on S3: this run's evaluation job writes its sealed verdict (0.4958 < 0.9, or
    0.97 for the control) with the job role; then a job edits it, or another run's evaluation job plants its own,
    correctly sealed under its own key. The job role lets every write through; Airflow, reading as the Airflow
    principal, refuses every forged one."""
    conn_id = airflow_connection(world, monkeypatch)
    job = world.s3("job")
    evaluation_uri = f"{world.root}/{run_prefix(RUN, 'evaluate')}-{attack.replace(' ', '-')}"
    key = evaluation_uri.removeprefix(f"s3://{world.bucket}/") + "/" + boundary.VERDICT_FILE
    model_uri = f"{world.root}/{run_prefix(RUN, 'train')}/model"
    evaluation_job = job_name(DAG, "evaluate", RUN)
    record = _verdict(model_uri, 0.97 if attack == "none" else 0.4958, job_key(evaluation_job))
    if attack == "passed flipped":
        record = {**record, "passed": True}
    elif attack == "value raised":
        record = {**record, "value": 0.97, "passed": True}
    elif attack == "another run's job":
        record = _verdict(model_uri, 0.97, job_key(job_name(DAG, "evaluate", OTHER_RUN)))
    job.put_object(Bucket=world.bucket, Key=key, Body=json.dumps(record).encode())  # the job role allows it

    found = read_verdict(evaluation_uri, aws_conn_id=conn_id)
    assert found == record
    if attack == "none":
        assert check_verdict(found, FINGERPRINT, evaluation_uri, evaluation_job)["passed"] is True
    else:
        with pytest.raises(VerdictError, match="not sealed by evaluation job"):
            check_verdict(found, FINGERPRINT, evaluation_uri, evaluation_job)


HOLDOUT_SET = {"index.json": b'{"eval": [{"file": "eval/shard-00000.npy"}]}', "eval/shard-00000.npy": b"\x01" * 32}


@pytest.mark.parametrize("attack", ["none", "set swapped", "seal of another run's data job"])
def test_a_holdout_set_swapped_with_the_job_role_is_refused_by_airflow(world, monkeypatch, attack):
    """The swapped hold-out set on S3: this run's data job writes the fine-tune's shared set, its manifest and its
    sealed copy with the job role; then a job replaces the set and its manifest (the evaluation then names the
    fingerprint of what it found), or puts another run's data job's sealed copy in place of this run's. Airflow,
    reading as the Airflow principal, accepts only the verdict on the set this run's data job sealed."""
    from airflow_provider_trainium.registry.holdout import require_holdout
    from trainium_trainer.common.holdout import manifest, seal_uri

    conn_id = airflow_connection(world, monkeypatch)
    job = world.s3("job")
    holdout_uri = f"{world.root}/llama/finetune/holdout/" + "".join(c if c.isalnum() else "-" for c in attack)

    def put(uri: str, body: bytes) -> None:  # the job role allows every one of these writes
        job.put_object(Bucket=world.bucket, Key=uri.removeprefix(f"s3://{world.bucket}/"), Body=body)

    def data_job(files: dict[str, bytes], run: str, seal_at: str | None = None) -> None:
        key = job_key(job_name(DAG, "prepare_holdout", run))
        record = manifest(files)
        for name, body in files.items():
            put(f"{holdout_uri}/{name}", body)
        put(f"{holdout_uri}/{boundary.HOLDOUT_MANIFEST_FILE}", json.dumps(record).encode())
        sealed = {**record, boundary.SEAL_FIELD: boundary.seal(record, key)}
        put(seal_at or seal_uri(holdout_uri, key), json.dumps(sealed).encode())

    data_job(HOLDOUT_SET, RUN)
    judged = HOLDOUT_SET
    if attack == "set swapped":
        judged = {**HOLDOUT_SET, "eval/shard-00000.npy": b"\x00" * 32}
        for name, body in judged.items():
            put(f"{holdout_uri}/{name}", body)
        put(f"{holdout_uri}/{boundary.HOLDOUT_MANIFEST_FILE}", json.dumps(manifest(judged)).encode())
    elif attack == "seal of another run's data job":
        judged = {**HOLDOUT_SET, "eval/shard-00000.npy": b"\x00" * 32}
        mine = seal_uri(holdout_uri, job_key(job_name(DAG, "prepare_holdout", RUN)))
        data_job(judged, OTHER_RUN, seal_at=mine)
    verdict = {"holdout_fingerprint": boundary.record_fingerprint(manifest(judged))}

    check = lambda: require_holdout(verdict, "evaluate", holdout_uri, job_name(DAG, "prepare_holdout", RUN),  # noqa: E731
                                    "prepare_holdout", aws_conn_id=conn_id)  # fmt: skip
    if attack == "none":
        assert check() == verdict["holdout_fingerprint"]
    else:
        reason = "replaced between the data task" if attack == "set swapped" else "not sealed by data job"
        with pytest.raises(VerdictError, match=reason):
            check()
