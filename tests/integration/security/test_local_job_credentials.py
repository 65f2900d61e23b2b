"""A local job with an ``s3://`` root gets a scoped STS session, never the AWS connection's own keys
(which can write the model registry), against the moto server.

Moto hands out the session but does not evaluate session policies: that the policy denies writes under
``models/``, ``image-contexts/``, ``code/`` and ``compile-manifests/`` is checked on the policy document itself
(``test_the_session_policy_denies_airflows_prefixes``), against IAM's documented semantics (docs/fidelity.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_trainium.compile_manifest import MANIFESTS_DIR
from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.compute.local.job_credentials import (
    UnscopableCredentialsError,
    job_session_policy,
    scoped_job_environment,
)
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.conftest import MOTO_REGION

ROOT = "s3://trainium-artifacts/team-a"


def run_dump_env(backend: LocalBackend, tmp_path: Path) -> dict[str, str]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "go").touch()  # the job writes its environment and ends
    spec = JobSpec(name="t", entry_point="tests.integration.jobs.dump_env", args=(str(work),), nodes=1,
                   distributed=False, output_uri=f"{ROOT}/runs/x")  # fmt: skip
    handle = backend.submit(spec, "creds-job", {})
    try:
        assert backend.wait(handle, lambda line: None, 120).state is JobState.SUCCEEDED
    finally:
        if backend.status(handle).state is JobState.RUNNING:
            backend.cancel(handle, "test cleanup")
    return json.loads((work / "env-single.json").read_text())


def test_a_local_job_gets_a_session_not_the_connections_keys(aws_conn_id, tmp_path):
    backend = LocalBackend(tmp_path / "state", aws_conn_id=aws_conn_id, artifact_root=ROOT)
    env = run_dump_env(backend, tmp_path)

    assert env["AWS_ACCESS_KEY_ID"] != "testing" and env["AWS_SECRET_ACCESS_KEY"] != "testing"
    assert env["AWS_SESSION_TOKEN"]
    assert env["AWS_ENDPOINT_URL"].startswith("http://") and env["AWS_REGION"] == MOTO_REGION
    # the session reaches S3 through the connection's endpoint (moto does not record whose session it is)
    import boto3

    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=MOTO_REGION,
                      aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                      aws_session_token=env["AWS_SESSION_TOKEN"])  # fmt: skip
    assert "Buckets" in s3.list_buckets()


def test_with_a_job_role_the_job_assumes_it(aws_conn_id):
    role = "arn:aws:iam::123456789012:role/trainium-job"
    env = scoped_job_environment(aws_conn_id, ROOT, job_name="j", duration_s=60, role_arn=role)
    import boto3

    sts = boto3.client("sts", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=MOTO_REGION,
                       aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                       aws_session_token=env["AWS_SESSION_TOKEN"])  # fmt: skip
    assert ":assumed-role/trainium-job/" in sts.get_caller_identity()["Arn"]


def test_temporary_connection_credentials_without_a_job_role_are_refused(moto_reset, monkeypatch):
    extra = {"endpoint_url": moto_reset, "region_name": MOTO_REGION, "aws_session_token": "session"}
    conn = {"conn_type": "aws", "login": "ASIATEMPORARY", "password": "secret", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_AWS_TEMP", json.dumps(conn))
    with pytest.raises(UnscopableCredentialsError, match="job_role_arn"):
        scoped_job_environment("aws_temp", ROOT, job_name="j", duration_s=60)


def test_the_session_policy_denies_airflows_prefixes():
    policy = job_session_policy(ROOT)
    allow, deny = policy["Statement"]
    assert allow["Effect"] == "Allow" and set(allow["Action"]) >= {"s3:*"} and "iam:*" not in allow["Action"]
    assert deny["Effect"] == "Deny"
    assert set(deny["Resource"]) == {
        "arn:aws:s3:::trainium-artifacts/team-a/models/*",
        "arn:aws:s3:::trainium-artifacts/team-a/image-contexts/*",
        "arn:aws:s3:::trainium-artifacts/team-a/code/*",
        f"arn:aws:s3:::trainium-artifacts/team-a/{MANIFESTS_DIR}/*",  # the record a compile cache is checked against
    }
    assert {"s3:PutObject", "s3:DeleteObject"} <= set(deny["Action"])
    bucket_root = job_session_policy("s3://bucket")["Statement"][1]["Resource"]
    assert "arn:aws:s3:::bucket/models/*" in bucket_root
    assert len(json.dumps(job_session_policy(ROOT), separators=(",", ":"))) < 2048  # STS's plaintext limit


def test_a_file_root_gets_a_read_only_session():
    (statement,) = job_session_policy("file:///data/root")["Statement"]
    assert statement["Effect"] == "Allow"
    assert not any(a.startswith(("s3:Put", "s3:Delete")) or a == "s3:*" for a in statement["Action"])
