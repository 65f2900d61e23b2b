"""Credentials for child processes that reach S3 themselves (local compute with an ``s3://`` root).

A local job never gets the AWS connection's own keys: those can write the model registry, and the registry is
written by Airflow alone. It gets a short-lived STS session whose session policy denies writes under the
artifact root's ``models/``, ``image-contexts/``, ``code/`` and ``compile-manifests/`` prefixes (with a
``file://`` root, whose only S3 use is reading input prefixes, a read-only session):

- with the trainium connection's ``job_role_arn`` (the role ECS and Batch containers run as), AssumeRole of
  that role, so a local job has what a container has, minus the denied prefixes;
- otherwise, with an IAM user's long-term keys, GetFederationToken;
- temporary connection credentials without a ``job_role_arn`` cannot be narrowed (GetFederationToken refuses
  them), so the job is refused before it starts, with what to set.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Prefixes under the artifact root that only Airflow writes: the registry, image build contexts, code bundles and
#: the compile caches' manifests (``compile_manifest.MANIFESTS_DIR``: a job that rewrote one could vouch for a
#: planted cache entry).
PROTECTED_PREFIXES = ("models", "image-contexts", "code", "compile-manifests")
#: Object writes the session policy denies under the protected prefixes (CopyObject is PutObject).
DENIED_WRITES = (
    "s3:PutObject",
    "s3:PutObjectAcl",
    "s3:PutObjectTagging",
    "s3:PutObjectRetention",
    "s3:PutObjectLegalHold",
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:DeleteObjectTagging",
    "s3:RestoreObject",
    "s3:AbortMultipartUpload",
)
#: What a job may do at all: S3, and KMS for SSE-KMS buckets. Nothing else of the identity's permissions.
ALLOWED_ACTIONS = ("s3:*", "kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey")
#: A job whose artifact root is not on S3 only reads from S3 (a base model under an input prefix).
READ_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion", "s3:ListBucket", "s3:GetBucketLocation", "kms:Decrypt")
#: GetFederationToken's bounds; AssumeRole's default maximum (and role chaining's) is one hour.
FEDERATION_SECONDS = (900, 129_600)
ASSUME_ROLE_SECONDS = (900, 3_600)


class UnscopableCredentialsError(ValueError):
    """The connection's credentials cannot be narrowed for a job: refused before the job starts."""


def _bucket_and_prefix(artifact_root: str) -> tuple[str, str]:
    match = re.match(r"^s3://([^/]+)/?(.*)$", artifact_root)
    if not match:
        raise ValueError(f"scoped credentials need an s3:// artifact root, got {artifact_root!r}")
    prefix = match.group(2).strip("/")
    return match.group(1), f"{prefix}/" if prefix else ""


def job_session_policy(artifact_root: str) -> dict[str, Any]:
    """The session policy of a local job: S3 (and KMS) only, no writes under the protected prefixes; read-only
    when the artifact root is not on S3."""
    if not artifact_root.startswith("s3://"):
        return {
            "Version": "2012-10-17",
            "Statement": [{"Sid": "ReadInputs", "Effect": "Allow", "Action": list(READ_ACTIONS), "Resource": "*"}],
        }
    bucket, prefix = _bucket_and_prefix(artifact_root)
    protected = [f"arn:aws:s3:::{bucket}/{prefix}{name}/*" for name in PROTECTED_PREFIXES]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "JobData", "Effect": "Allow", "Action": list(ALLOWED_ACTIONS), "Resource": "*"},
            {"Sid": "OnlyAirflowWritesThese", "Effect": "Deny", "Action": list(DENIED_WRITES), "Resource": protected},
        ],
    }


def _clamp(seconds: float, bounds: tuple[int, int]) -> int:
    return int(min(max(seconds, bounds[0]), bounds[1]))


def _session_name(job_name: str) -> str:
    """2-32 characters of ``[\\w+=,.@-]`` (GetFederationToken's ``Name``; AssumeRole allows 64)."""
    name = re.sub(r"[^\w+=,.@-]", "-", job_name)[:32]
    return name if len(name) >= 2 else f"trainium-{name}"


def scoped_job_environment(
    aws_conn_id: str | None,
    artifact_root: str,
    *,
    job_name: str,
    duration_s: float,
    role_arn: str | None = None,
) -> dict[str, str]:
    """AWS_* variables of a short-lived session scoped by :func:`job_session_policy`, endpoint_url included."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    hook = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="sts")
    sts = hook.get_conn()
    policy = json.dumps(job_session_policy(artifact_root), separators=(",", ":"))
    if role_arn:
        answer = sts.assume_role(RoleArn=role_arn, RoleSessionName=_session_name(job_name), Policy=policy,
                                 DurationSeconds=_clamp(duration_s, ASSUME_ROLE_SECONDS))  # fmt: skip
    else:
        if hook.get_credentials().token:
            raise UnscopableCredentialsError(
                f"local compute with the artifact root {artifact_root} gives its jobs scoped credentials, but the "
                f"AWS connection {aws_conn_id!r} has temporary credentials (an assumed role or SSO session), which "
                "GetFederationToken refuses: set the trainium connection's job_role_arn to a role the job may "
                "assume, or use an IAM user's keys"
            )
        answer = sts.get_federation_token(Name=_session_name(job_name), Policy=policy,
                                          DurationSeconds=_clamp(duration_s, FEDERATION_SECONDS))  # fmt: skip
    credentials = answer["Credentials"]
    env = {
        "AWS_ACCESS_KEY_ID": credentials["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": credentials["SecretAccessKey"],
        "AWS_SESSION_TOKEN": credentials["SessionToken"],
    }
    if hook.region_name:
        env["AWS_DEFAULT_REGION"] = env["AWS_REGION"] = hook.region_name
    endpoint = hook.conn_config.endpoint_url
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return env
