"""ECR existence checks and the CodeBuild builder against a moto server, through the aws_moto connection."""

from __future__ import annotations

import json
import logging
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.image.builders.base import BuildOutput, BuildRequest, LogTail
from airflow_provider_trainium.image.builders.codebuild import CodeBuildBuilder
from airflow_provider_trainium.image.container_registry import EcrRegistry, parse_repository
from airflow_provider_trainium.image.context import BuildContext
from airflow_provider_trainium.image.ensure import ensure_image
from airflow_provider_trainium.image.errors import BuilderUnavailable, ContainerRegistryError
from tests.integration.image.conftest import CountingBuilder, write_tree

ROLE = "arn:aws:iam::123456789012:role/trainium-codebuild"


def client(aws_conn_id: str, service: str) -> Any:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    return AwsBaseHook(aws_conn_id=aws_conn_id, client_type=service).conn


def put_image(aws_conn_id: str, repository: str, tag: str, layer_seed: str) -> str:
    """Store a manifest under ``tag`` the way a finished push would; returns ECR's digest for it."""
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": 1,
            "digest": "sha256:" + "0" * 64,
        },
        "layers": [
            {
                "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "size": 1,
                "digest": "sha256:" + (layer_seed * 64)[:64],
            }
        ],
    }
    response = client(aws_conn_id, "ecr").put_image(
        repositoryName=repository, imageManifest=json.dumps(manifest), imageTag=tag
    )
    return response["image"]["imageId"]["imageDigest"]


@pytest.fixture
def app(tmp_path: Path) -> BuildContext:
    root = write_tree(
        tmp_path / "repo",
        {
            "docker/Dockerfile": "FROM scratch\nCOPY trainium_trainer/ /opt/trainer/\n",
            "trainium_trainer/launch.py": "print(1)\n",
        },
    )
    return BuildContext.load(root, "docker/Dockerfile")


def test_ecr_lookup_finds_a_tag_only_once_it_exists(aws_conn_id: str) -> None:
    repo = client(aws_conn_id, "ecr").create_repository(repositoryName="trainium/train")["repository"]
    registry = EcrRegistry("trainium/train", aws_conn_id=aws_conn_id)
    assert registry.repository == repo["repositoryUri"]
    assert registry.lookup("ctx-abc") is None
    digest = put_image(aws_conn_id, "trainium/train", "ctx-abc", "a")
    assert registry.lookup("ctx-abc") == digest
    assert registry.lookup("ctx-other") is None


def test_missing_ecr_repository_is_a_clear_error(aws_conn_id: str) -> None:
    with pytest.raises(ContainerRegistryError, match="ECR repository 'nope' does not exist"):
        EcrRegistry("nope", aws_conn_id=aws_conn_id).lookup("ctx-abc")


def test_repository_strings_pick_the_registry(aws_conn_id: str) -> None:
    ecr_uri = parse_repository(
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/train", aws_conn_id=aws_conn_id, region_name=None
    )
    assert isinstance(ecr_uri, EcrRegistry) and (ecr_uri.name, ecr_uri.region_name) == (
        "team/train",
        "eu-west-1",
    )
    assert isinstance(parse_repository("train", aws_conn_id=aws_conn_id, region_name="us-east-1"), EcrRegistry)
    oci = parse_repository("localhost:5000/train", aws_conn_id=None, region_name=None, insecure=True)
    assert not isinstance(oci, EcrRegistry) and oci.repository == "localhost:5000/train"


def test_ecr_credentials_are_never_logged(
    aws_conn_id: str, app: BuildContext, caplog: pytest.LogCaptureFixture
) -> None:
    client(aws_conn_id, "ecr").create_repository(repositoryName="trainium/creds")
    registry = EcrRegistry("trainium/creds", aws_conn_id=aws_conn_id)
    seen: list[BuildRequest] = []

    class PushingBuilder:
        name = "recording"

        def build(self, request: BuildRequest) -> str | None:
            seen.append(request)
            put_image(aws_conn_id, "trainium/creds", request.image.rpartition(":")[2], "c")
            return None

    with caplog.at_level(logging.DEBUG):
        result = ensure_image(app, registry, PushingBuilder())
    (auth,) = seen[0].auths
    assert auth.password and auth.host == registry.repository.partition("/")[0]
    assert auth.password not in repr(seen[0]) and auth.password not in caplog.text
    assert result.built and result.reference == f"{registry.repository}@{result.digest}"


def versioned_artifacts_bucket(aws_conn_id: str) -> Any:
    """The bucket ``artifacts`` with versioning on, as CodeBuild's context bucket must be; an S3 client."""
    s3 = client(aws_conn_id, "s3")
    s3.create_bucket(Bucket="artifacts")
    s3.put_bucket_versioning(Bucket="artifacts", VersioningConfiguration={"Status": "Enabled"})
    return s3


def test_codebuild_uploads_the_context_creates_the_project_and_runs_a_build(
    aws_conn_id: str, app: BuildContext, tmp_path: Path
) -> None:
    s3 = versioned_artifacts_bucket(aws_conn_id)
    builder = CodeBuildBuilder(
        aws_conn_id=aws_conn_id,
        source_uri="s3://artifacts/image-contexts",
        service_role_arn=ROLE,
        log_group="/trainium/codebuild",
        poll_interval=0,
    )
    staged = app.stage(tmp_path / "staged")
    request = BuildRequest(staged, "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:ctx-1", app.digest)
    builder.build(request)

    # The context went to S3 as a zip named by its content hash, holding exactly the hashed entries.
    body = s3.get_object(Bucket="artifacts", Key=f"image-contexts/{app.digest}.zip")["Body"].read()
    (tmp_path / "ctx.zip").write_bytes(body)
    with zipfile.ZipFile(tmp_path / "ctx.zip") as archive:
        names = {n.rstrip("/") for n in archive.namelist()}
    assert names == {e.path for e in app.entries}

    codebuild = client(aws_conn_id, "codebuild")
    (project,) = codebuild.batch_get_projects(names=["trainium-image-build"])["projects"]
    assert project["environment"]["privilegedMode"] is True
    assert project["serviceRole"] == ROLE
    assert project["logsConfig"]["cloudWatchLogs"]["groupName"] == "/trainium/codebuild"
    (build_id,) = codebuild.list_builds_for_project(projectName="trainium-image-build")["ids"]
    (started,) = codebuild.batch_get_builds(ids=[build_id])["builds"]
    assert started["buildStatus"] == "SUCCEEDED"
    # The build is pinned to the exact object version uploaded, not to whatever the key holds later.
    (uploaded,) = s3.list_object_versions(Bucket="artifacts", Prefix=f"image-contexts/{app.digest}.zip")["Versions"]
    assert started["sourceVersion"] == uploaded["VersionId"]

    # A second image reuses the project as it is and starts a second build.
    builder.build(BuildRequest(staged, "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:ctx-2", "f" * 64))
    assert len(codebuild.list_builds_for_project(projectName="trainium-image-build")["ids"]) == 2
    assert codebuild.list_projects()["projects"] == ["trainium-image-build"]


def test_codebuild_refuses_an_unversioned_context_bucket(aws_conn_id: str, app: BuildContext, tmp_path: Path) -> None:
    client(aws_conn_id, "s3").create_bucket(Bucket="artifacts")
    builder = CodeBuildBuilder(aws_conn_id=aws_conn_id, source_uri="s3://artifacts/image-contexts",
                               service_role_arn=ROLE, poll_interval=0)  # fmt: skip
    request = BuildRequest(app.stage(tmp_path / "staged"), "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1", "a" * 64)
    with pytest.raises(BuilderUnavailable, match="no versioning"):
        builder.build(request)
    assert client(aws_conn_id, "codebuild").list_builds()["ids"] == []


def test_codebuild_without_project_or_role_fails_before_starting(
    aws_conn_id: str, app: BuildContext, tmp_path: Path
) -> None:
    versioned_artifacts_bucket(aws_conn_id)
    builder = CodeBuildBuilder(aws_conn_id=aws_conn_id, source_uri="s3://artifacts/ctx", poll_interval=0)
    request = BuildRequest(
        app.stage(tmp_path / "s"), "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:ctx-1", app.digest
    )
    with pytest.raises(BuilderUnavailable, match="does not exist and no codebuild_service_role_arn"):
        builder.build(request)
    assert client(aws_conn_id, "codebuild").list_builds()["ids"] == []
    with pytest.raises(BuilderUnavailable, match="s3:// location"):
        CodeBuildBuilder(aws_conn_id=aws_conn_id, source_uri=None)


def test_codebuild_log_streaming_reads_each_line_once(aws_conn_id: str) -> None:
    logs = client(aws_conn_id, "logs")
    logs.create_log_group(logGroupName="/trainium/codebuild")
    logs.create_log_stream(logGroupName="/trainium/codebuild", logStreamName="trainium-image-build/b1")

    now = int(time.time() * 1000)  # CloudWatch drops events older than 14 days

    def put(*lines: str, start: int) -> None:
        events = [{"timestamp": now + start + i, "message": line} for i, line in enumerate(lines)]
        logs.put_log_events(
            logGroupName="/trainium/codebuild", logStreamName="trainium-image-build/b1", logEvents=events
        )

    builder = CodeBuildBuilder(aws_conn_id=aws_conn_id, source_uri="s3://artifacts/ctx", poll_interval=0)
    build = {"logs": {"groupName": "/trainium/codebuild", "streamName": "trainium-image-build/b1"}}
    tail, position = LogTail("codebuild"), {}
    put("Step 1/3 : FROM base", "Step 2/3 : COPY", start=0)
    builder.stream_logs(build, tail, position)
    put("Step 3/3 : RUN make", "error: make failed", start=10)
    builder.stream_logs(build, tail, position)
    assert list(tail.lines) == [
        "Step 1/3 : FROM base",
        "Step 2/3 : COPY",
        "Step 3/3 : RUN make",
        "error: make failed",
    ]
    builder.stream_logs({"logs": {}}, tail, position)  # no stream yet: nothing to read, no error
    assert len(tail.lines) == 4


def test_codebuild_then_ecr_end_to_end_second_run_skips(aws_conn_id: str, app: BuildContext) -> None:
    """moto's CodeBuild runs no commands, so the wrapper plays the buildspec's push with PutImage."""
    client(aws_conn_id, "s3").create_bucket(Bucket="artifacts")
    client(aws_conn_id, "s3").put_bucket_versioning(Bucket="artifacts", VersioningConfiguration={"Status": "Enabled"})
    client(aws_conn_id, "ecr").create_repository(repositoryName="trainium/train")
    registry = EcrRegistry("trainium/train", aws_conn_id=aws_conn_id)
    codebuild = CodeBuildBuilder(
        aws_conn_id=aws_conn_id, source_uri="s3://artifacts/ctx", service_role_arn=ROLE, poll_interval=0
    )

    class PushAfterBuild:
        name = "codebuild"

        def build(self, request: BuildRequest) -> BuildOutput:
            reported = codebuild.build(request)
            put_image(aws_conn_id, "trainium/train", request.image.rpartition(":")[2], "d")
            return reported

    builder = CountingBuilder(PushAfterBuild())
    first = ensure_image(app, registry, builder)
    second = ensure_image(app, registry, builder)
    assert first.built and not second.built and builder.calls == 1
    assert second.reference == first.reference
    assert len(client(aws_conn_id, "codebuild").list_builds()["ids"]) == 1
