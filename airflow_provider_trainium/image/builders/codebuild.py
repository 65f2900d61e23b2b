"""AWS CodeBuild: for workers with neither a Docker engine nor buildah (MWAA).

The staged context goes to S3 as a zip (the only archive CodeBuild takes from S3), a project with a
privileged Docker environment builds and pushes it, and its CloudWatch log is streamed into the task log.
The project logs in to ECR with its own service role, so no credentials leave this worker.

The buildspec pulls the base image before the build, reads the digest Docker pulled it by (its
``RepoDigests`` entry for the base's repository) and passes it as a ``--label``; the digest comes back as the
exported variable ``BASE_DIGEST``.
"""

from __future__ import annotations

import json
import logging
import shlex
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.image.builders.base import BASE_DIGEST_LABEL, BuildOutput, BuildRequest, LogTail
from airflow_provider_trainium.image.errors import BuilderUnavailable, BuildFailed

if TYPE_CHECKING:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

log = logging.getLogger(__name__)

DEFAULT_PROJECT = "trainium-image-build"
DEFAULT_BUILD_IMAGE = "aws/codebuild/standard:7.0"
#: The Neuron training image is large: the large compute type has the disk and memory to build it.
DEFAULT_COMPUTE_TYPE = "BUILD_GENERAL1_LARGE"
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "FAULT", "TIMED_OUT", "STOPPED"})


def base_digest_commands(base_image: str) -> list[str]:
    """Pull the base and set ``BASE_DIGEST`` to the digest Docker pulled it by (a pinned digest as written).

    The build container is fresh, so the base's only ``RepoDigests`` entry is the one this pull made.
    """
    pinned = base_image.partition("@")[2]
    quoted = shlex.quote(base_image)
    if pinned:
        return [f"docker pull {quoted}", f"BASE_DIGEST={shlex.quote(pinned)}"]
    return [
        f"docker pull {quoted}",
        f"BASE_DIGEST=$(docker image inspect --format '{{{{index .RepoDigests 0}}}}' {quoted} | cut -d@ -f2)",
        'test -n "$BASE_DIGEST" || { echo "docker knows no registry digest of the base image"; exit 1; }',
    ]


def buildspec(request: BuildRequest) -> str:
    """The buildspec for one image, as JSON (a YAML subset), with every argument shell-quoted."""
    build = ["docker", "build", "-f", request.context.dockerfile, "-t", request.image]
    for key, value in sorted(request.build_args.items()):
        build += ["--build-arg", f"{key}={value}"]
    if request.target:
        build += ["--target", request.target]
    build.append(".")
    build_line = shlex.join(build)
    base_commands: list[str] = []
    if request.base_image:
        base_commands = base_digest_commands(request.base_image)
        # Double quotes, so the shell expands the digest the line before set.
        build_line = build_line[: -len(" .")] + f' --label "{BASE_DIGEST_LABEL}=$BASE_DIGEST" .'
    image = shlex.quote(request.image)
    spec = {
        "version": 0.2,
        "env": {"exported-variables": ["IMAGE_DIGEST", "BASE_DIGEST"]},
        "phases": {
            "pre_build": {
                "commands": [
                    'aws ecr get-login-password --region "$AWS_REGION" | docker login --username AWS '
                    f"--password-stdin {shlex.quote(request.registry_host)}"
                ]
            },
            "build": {
                "commands": [
                    *base_commands,
                    build_line,
                    f"docker push {image}",
                    f"IMAGE_DIGEST=$(docker inspect --format '{{{{index .RepoDigests 0}}}}' {image} | cut -d@ -f2)",
                ]
            },
        },
    }
    return json.dumps(spec, indent=2)


class CodeBuildBuilder:
    """Runs one CodeBuild build per image tag; reached only through Airflow's AWS connection."""

    name = "codebuild"

    def __init__(
        self,
        *,
        aws_conn_id: str | None,
        region_name: str | None = None,
        source_uri: str | None,
        project_name: str = DEFAULT_PROJECT,
        service_role_arn: str | None = None,
        log_group: str | None = None,
        build_image: str = DEFAULT_BUILD_IMAGE,
        compute_type: str = DEFAULT_COMPUTE_TYPE,
        timeout_minutes: int = 120,
        poll_interval: float = 15.0,
    ) -> None:
        if not source_uri or not source_uri.startswith("s3://") or len(source_uri) <= len("s3://"):
            raise BuilderUnavailable(
                "the codebuild builder needs an s3:// location for the build context "
                f"(codebuild_source_uri or an s3:// artifact_root), got {source_uri!r}"
            )
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        bucket, _, prefix = source_uri[len("s3://") :].partition("/")
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.project_name = project_name
        self.service_role_arn = service_role_arn
        self.log_group = log_group
        self.build_image = build_image
        self.compute_type = compute_type
        self.timeout_minutes = timeout_minutes
        self.poll_interval = poll_interval

    def _hook(self, client_type: str) -> AwsBaseHook:
        from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

        return AwsBaseHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name, client_type=client_type)

    def upload_context(self, request: BuildRequest) -> tuple[str, str]:
        """Zip the staged context to ``s3://bucket/prefix/<context digest>.zip``; returns ``bucket/key`` and
        the S3 version id of exactly the object written, which the build is then pinned to: an object put
        under the same key afterwards (by anyone who may write there) is not what gets built."""
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook

        key = "/".join(p for p in (self.prefix, f"{request.context_digest}.zip") if p)
        with tempfile.TemporaryDirectory(prefix="trainium-codebuild-") as tmp:
            archive = Path(tmp, "context.zip")
            request.context.write_zip(archive)
            client = S3Hook(aws_conn_id=self.aws_conn_id, region_name=self.region_name).get_conn()
            with archive.open("rb") as body:
                response = client.put_object(Bucket=self.bucket, Key=key, Body=body)
        version = response.get("VersionId")
        if not version or version == "null":
            raise BuilderUnavailable(
                f"s3://{self.bucket} has no versioning: CodeBuild must be pinned to the exact context object "
                "uploaded (sourceVersion), so enable versioning on the bucket (the base stack does)"
            )
        return f"{self.bucket}/{key}", version

    def ensure_project(self, source_location: str) -> None:
        """Create the project once; an existing project is used as it is (it may be customised)."""
        client = self._hook("codebuild").conn
        if client.batch_get_projects(names=[self.project_name]).get("projects"):
            return
        if not self.service_role_arn:
            raise BuilderUnavailable(
                f"CodeBuild project {self.project_name!r} does not exist and no codebuild_service_role_arn "
                "was given to create it"
            )
        project: dict[str, Any] = {
            "name": self.project_name,
            "description": "Builds the airflow-provider-trainium training image",
            "source": {"type": "S3", "location": source_location},
            "artifacts": {"type": "NO_ARTIFACTS"},
            "environment": {
                "type": "LINUX_CONTAINER",
                "image": self.build_image,
                "computeType": self.compute_type,
                "privilegedMode": True,
            },
            "serviceRole": self.service_role_arn,
            "timeoutInMinutes": self.timeout_minutes,
        }
        if self.log_group:
            project["logsConfig"] = {"cloudWatchLogs": {"status": "ENABLED", "groupName": self.log_group}}
        client.create_project(**project)
        log.info("created CodeBuild project %s", self.project_name)

    def start(self, request: BuildRequest, source_location: str, source_version: str) -> str:
        client = self._hook("codebuild").conn
        response = client.start_build(
            projectName=self.project_name,
            sourceTypeOverride="S3",
            sourceLocationOverride=source_location,
            sourceVersion=source_version,  # for S3 sources: the object version to build
            buildspecOverride=buildspec(request),
            privilegedModeOverride=True,
            # A retry within CodeBuild's idempotency window joins the build already started for this tag.
            idempotencyToken=request.context_digest[:64],
        )
        build_id: str = response["build"]["id"]
        log.info("started CodeBuild build %s for %s", build_id, request.image)
        return build_id

    def wait(self, build_id: str) -> dict[str, Any]:
        """Poll until the build ends, streaming its log; BuildFailed with the log tail unless it succeeded."""
        client = self._hook("codebuild").conn
        tail = LogTail("codebuild")
        token: dict[str, Any] = {}
        while True:
            build: dict[str, Any] = client.batch_get_builds(ids=[build_id])["builds"][0]
            self.stream_logs(build, tail, token)
            status = build.get("buildStatus", "IN_PROGRESS")
            if status in TERMINAL:
                break
            time.sleep(self.poll_interval)
        if status != "SUCCEEDED":
            failed = [p for p in build.get("phases", []) if p.get("phaseStatus") not in (None, "SUCCEEDED")]
            where = ""
            if failed:
                contexts = "; ".join(c.get("message", "") for c in failed[0].get("contexts", []) if c.get("message"))
                where = f" in phase {failed[0].get('phaseType')}" + (f": {contexts}" if contexts else "")
            raise BuildFailed(f"CodeBuild build {build_id} ended {status}{where}", tuple(tail.lines))
        return build

    def stream_logs(self, build: dict[str, Any], tail: LogTail, token: dict[str, Any]) -> None:
        logs = build.get("logs") or {}
        group, stream = logs.get("groupName"), logs.get("streamName")
        if not group or not stream:
            return  # the log stream appears only once the build container starts
        from airflow.providers.amazon.aws.hooks.logs import AwsLogsHook

        hook = AwsLogsHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
        # One continuation token per build, so each poll reads only the lines that are new.
        position = token.setdefault(
            "position",
            AwsLogsHook.ContinuationToken(),
        )
        try:
            for event in hook.get_log_events(group, stream, continuation_token=position):
                tail(event["message"])
        except hook.conn.exceptions.ResourceNotFoundException:
            return

    def build(self, request: BuildRequest) -> BuildOutput:
        source, version = self.upload_context(request)
        self.ensure_project(source)
        build = self.wait(self.start(request, source, version))
        exported = {v.get("name"): v.get("value") for v in build.get("exportedEnvironmentVariables") or []}
        return BuildOutput(exported.get("IMAGE_DIGEST") or None, exported.get("BASE_DIGEST") or None)
