"""An S3 that enforces the base template's IAM policies: a moto server of its own, in its own process, where a
job acts with exactly the job role's policy and Airflow with exactly the published Airflow policy.

What moto 5.2 evaluates once authentication is on (``moto/iam/access_control.py``, ``moto/core/authorization.py``,
``moto/s3/responses.py``): the signature and access key of every request; the caller's identity policies (an IAM
user's inline, attached and group policies; an assumed role's inline and attached policies, never a session
policy); ``Action`` and ``Resource`` with ``*`` wildcards; explicit Deny over Allow. What it does not: conditions
(an identity policy is checked with no request context, so every condition holds: ``s3:prefix`` on ListBucket is
not checked and the job role lists the whole bucket here), and bucket policies, apart from object requests,
where it evaluates them ignoring every condition (the template's ``aws:SecureTransport`` and ``aws:PrincipalArn``
would deny everyone): this bucket has none, so what is proven here is the job role's own policy, without the
bucket policy's extra Deny. A DeleteObjects (multi-object delete) is authorised on the bucket ARN, so moto refuses it to
a role whose deletes are scoped to object ARNs, unlike AWS.

The authorisation switch is process-wide (``settings.INITIAL_NO_AUTH_ACTION_COUNT``): a ``ThreadedMotoServer``
here would turn it on for the session's shared moto server and every in-process mock too, hence the separate
process. It starts with authentication off (the env var at ``inf``), gets its bucket, roles, user and seed objects,
then ``/moto-api/reset-auth`` with 0 turns it on for every later request.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.conftest import MOTO_REGION, free_port
from tests.integration.cloudformation.conftest import load_template, substitute

ACCOUNT = "123456789012"
BUCKET = "trainium-artifacts-123456789012"
PREFIX = "trainium"
STACK = "trn-base"
#: What the base stack's resources resolve to in this account (``Ref`` and ``Fn::GetAtt ... Arn``).
JOB_ROLE = "trainium-job"
EXECUTION_ROLE = "trainium-execution"
AIRFLOW_USER = "airflow"
#: A job role widened to ``s3:*`` on ``*``: the control that shows the denials come from the template's policy.
WIDENED_ROLE = "trainium-job-widened"


def stack_values(bucket: str = BUCKET, prefix: str = PREFIX) -> dict[str, str]:
    """What ``Ref``, ``Fn::GetAtt`` and ``Fn::Sub`` resolve to in the base template, deployed to ``ACCOUNT``."""
    log_group = f"/trainium/{STACK}/jobs"
    return {
        "AWS::Partition": "aws",
        "AWS::Region": MOTO_REGION,
        "AWS::AccountId": ACCOUNT,
        "AWS::StackName": STACK,
        "ArtifactPrefix": prefix,
        "ArtifactBucket": bucket,
        "ArtifactBucket.Arn": f"arn:aws:s3:::{bucket}",
        "JobRole.Arn": f"arn:aws:iam::{ACCOUNT}:role/{JOB_ROLE}",
        "EcsExecutionRole.Arn": f"arn:aws:iam::{ACCOUNT}:role/{EXECUTION_ROLE}",
        "Repository.Arn": f"arn:aws:ecr:{MOTO_REGION}:{ACCOUNT}:repository/airflow-trainium/trainer",
        "TrainingLogGroup": log_group,
        "TrainingLogGroup.Arn": f"arn:aws:logs:{MOTO_REGION}:{ACCOUNT}:log-group:{log_group}:*",
    }


def render(node: Any, values: Mapping[str, str]) -> Any:
    """``node`` with ``Ref``, ``Fn::GetAtt`` (``Arn``) and ``Fn::Sub`` resolved from ``values``; anything else
    the template might use (``Fn::If``, a name not in ``values``) is an error, never passed through."""
    if isinstance(node, list):
        return [render(item, values) for item in node]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        ((name, arg),) = node.items()
        if name == "Ref":
            return values[arg]
        if name == "Fn::GetAtt":
            resource, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            return values[f"{resource}.{attribute}"]
        if name == "Fn::Sub":
            if not isinstance(arg, str):
                raise ValueError(f"Fn::Sub with a variable map is not rendered here: {arg!r}")
            return substitute(arg, **values)
        if name.startswith("Fn::"):
            raise ValueError(f"{name} is not rendered here")
    return {key: render(value, values) for key, value in node.items()}


def job_role(values: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The base template's JobRole: its trust policy and its inline policies by name, rendered."""
    role = load_template("base")["Resources"]["JobRole"]["Properties"]
    assert not role.get("ManagedPolicyArns"), "the harness renders inline policies only"
    policies = {p["PolicyName"]: render(p["PolicyDocument"], values) for p in role["Policies"]}
    return render(role["AssumeRolePolicyDocument"], values), policies


def airflow_policy(values: Mapping[str, str]) -> dict[str, Any]:
    """The base template's AirflowPolicy document (what the Airflow principal attaches), rendered."""
    return render(load_template("base")["Resources"]["AirflowPolicy"]["Properties"]["PolicyDocument"], values)


WIDE_OPEN = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


@dataclass
class Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def env(self) -> dict[str, str]:
        env = {"AWS_ACCESS_KEY_ID": self.access_key_id, "AWS_SECRET_ACCESS_KEY": self.secret_access_key}
        if self.session_token:
            env["AWS_SESSION_TOKEN"] = self.session_token
        return env


@dataclass
class IamS3:
    """The server and who may call it: ``job`` (an ECS task's session of the job role), ``airflow`` (a user
    with the Airflow policy) and ``widened`` (the job role with ``s3:*`` on ``*``, the control)."""

    url: str
    bucket: str
    prefix: str
    principals: dict[str, Credentials] = field(default_factory=dict)

    @property
    def root(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def key(self, *parts: str) -> str:
        return "/".join((self.prefix, *parts))

    def s3(self, who: str) -> Any:
        import boto3

        c = self.principals[who]
        return boto3.client("s3", endpoint_url=self.url, region_name=MOTO_REGION, aws_access_key_id=c.access_key_id,
                            aws_secret_access_key=c.secret_access_key, aws_session_token=c.session_token)  # fmt: skip


def _wait_until_listening(process: subprocess.Popen[bytes], port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the moto server exited with {process.returncode} before listening")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"the moto server did not listen on {port} within {timeout_s} s")


def _set_up(url: str, bucket: str, prefix: str, seed: Mapping[str, bytes]) -> dict[str, Credentials]:
    """Bucket, roles, user and ``seed`` objects, with authentication still off; the principals' credentials."""
    import boto3

    admin = {"endpoint_url": url, "region_name": MOTO_REGION, "aws_access_key_id": "setup",
             "aws_secret_access_key": "setup"}  # fmt: skip
    s3, iam, sts = (boto3.client(service, **admin) for service in ("s3", "iam", "sts"))
    s3.create_bucket(Bucket=bucket)
    for key, body in seed.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    values = stack_values(bucket, prefix)
    trust, policies = job_role(values)
    principals = {}
    for role, documents in ((JOB_ROLE, policies), (WIDENED_ROLE, {**policies, "wide-open": WIDE_OPEN})):
        iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust))
        for name, document in documents.items():
            iam.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps(document))
        # An ECS task's credentials: a session of the role named after the task (authentication is off, so the
        # trust policy, which names ecs-tasks.amazonaws.com, is not in the way).
        answer = sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{role}", RoleSessionName="task-0123456789")
        c = answer["Credentials"]
        principals["job" if role == JOB_ROLE else "widened"] = Credentials(
            c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"]
        )
    arn = iam.create_policy(PolicyName="trainium-airflow", PolicyDocument=json.dumps(airflow_policy(values)))
    iam.create_user(UserName=AIRFLOW_USER)
    iam.attach_user_policy(UserName=AIRFLOW_USER, PolicyArn=arn["Policy"]["Arn"])
    key = iam.create_access_key(UserName=AIRFLOW_USER)["AccessKey"]
    principals["airflow"] = Credentials(key["AccessKeyId"], key["SecretAccessKey"])
    return principals


def start(seed: Mapping[str, bytes] | None = None, bucket: str = BUCKET, prefix: str = PREFIX) -> Iterator[IamS3]:
    """Run an authorising moto server for as long as the generator is open (a fixture's body)."""
    import requests

    port = free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "inf", "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_until_listening(process, port)
        url = f"http://127.0.0.1:{port}"
        principals = _set_up(url, bucket, prefix, dict(seed or {}))
        requests.post(f"{url}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
        yield IamS3(url, bucket, prefix, principals)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def denied(call: Any, *args: Any, **kwargs: Any) -> bool:
    """Whether the S3 call was refused with AccessDenied (any other error is raised)."""
    from botocore.exceptions import ClientError

    try:
        call(*args, **kwargs)
    except ClientError as err:
        if err.response["Error"]["Code"] == "AccessDenied":
            return True
        raise
    return False


def airflow_connection(world: IamS3, monkeypatch: pytest.MonkeyPatch) -> str:
    """An Airflow AWS connection to ``world`` as its Airflow user (the published Airflow policy); its id names the
    server's port, since Airflow keeps one object-storage file system per connection id for the process."""
    conn_id = "aws_iam_moto_" + world.url.rsplit(":", 1)[1]
    c = world.principals["airflow"]
    conn = {"conn_type": "aws", "login": c.access_key_id, "password": c.secret_access_key,
            "extra": {"endpoint_url": world.url, "region_name": MOTO_REGION}}  # fmt: skip
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    return conn_id
