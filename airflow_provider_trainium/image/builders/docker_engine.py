"""The Docker engine through the docker SDK: the laptop path, where a daemon is already running.

The base image is pulled first when the engine lacks it (what ``docker build`` does without ``--pull``), so
the digest in the label is that of the image the build starts from: the engine's ``RepoDigests`` entry for
the base's repository, the digest it pulled the tag by.
"""

from __future__ import annotations

import logging
import tempfile
from typing import Any

from airflow_provider_trainium.image.builders.base import BASE_DIGEST_LABEL, BuildOutput, BuildRequest, LogTail
from airflow_provider_trainium.image.errors import BuilderUnavailable, BuildFailed

log = logging.getLogger(__name__)


class DockerEngineBuilder:
    """Sends the staged context as a tar to the engine, then pushes with the registry's credentials."""

    name = "docker"

    def __init__(self, base_url: str | None = None, timeout: int = 3600) -> None:
        self.base_url = base_url
        self.timeout = timeout

    def _client(self) -> Any:
        try:
            from docker.errors import DockerException

            from docker import DockerClient, from_env  # type: ignore[attr-defined]  # mypy reads the repo's docker/ folder as this package
        except ImportError:
            raise BuilderUnavailable("the docker SDK is not installed (pip install docker)") from None
        try:
            if self.base_url:
                client = DockerClient(base_url=self.base_url, timeout=self.timeout)
            else:
                client = from_env(timeout=self.timeout)
            client.ping()
        except DockerException as exc:
            raise BuilderUnavailable(
                f"no Docker engine reachable ({exc}); choose builder='buildah' or 'codebuild'"
            ) from None
        return client

    @staticmethod
    def base_digest(client: Any, base_image: str) -> str | None:
        """Pull ``base_image`` unless the engine has it, then the digest the engine knows it by."""
        from docker.errors import APIError, ImageNotFound
        from docker.utils import parse_repository_tag

        repository: str
        tag: str | None
        repository, tag = parse_repository_tag(base_image)
        try:
            attrs = client.api.inspect_image(base_image)
        except ImageNotFound:
            tail = LogTail("docker pull")
            try:
                for chunk in client.api.pull(repository, tag=tag or "latest", stream=True, decode=True):
                    if "error" in chunk:
                        tail(str(chunk["error"]))
                        raise BuildFailed(f"docker pull of the base image {base_image} failed", tuple(tail.lines))
            except APIError as exc:
                raise BuildFailed(f"docker pull of the base image {base_image} failed: {exc}") from None
            attrs = client.api.inspect_image(base_image)
        if tag and tag.startswith("sha256:"):
            return tag
        for entry in attrs.get("RepoDigests") or []:
            name, _, digest = str(entry).partition("@")
            if name == repository or name.endswith("/" + repository) or repository.endswith("/" + name):
                return digest
        log.warning("the engine knows no registry digest of the base image %s (built locally?)", base_image)
        return None

    def build(self, request: BuildRequest) -> BuildOutput:
        client = self._client()
        for auth in request.auths:
            client.login(username=auth.username, password=auth.password, registry=auth.host, reauth=True)
        base_digest = self.base_digest(client, request.base_image) if request.base_image else None
        tail = LogTail("docker build")
        with tempfile.TemporaryFile() as archive:
            request.context.write_tar(archive)
            archive.seek(0)
            stream = client.api.build(
                fileobj=archive,
                custom_context=True,
                dockerfile=request.context.dockerfile,
                tag=request.image,
                buildargs=request.build_args or None,
                target=request.target,
                labels={BASE_DIGEST_LABEL: base_digest} if base_digest else None,
                rm=True,
                decode=True,
            )
            for chunk in stream:
                if "stream" in chunk:
                    for line in str(chunk["stream"]).splitlines():
                        tail(line)
                if "error" in chunk:
                    tail(str(chunk["error"]))
                    raise BuildFailed(f"docker build of {request.image} failed", tuple(tail.lines))
        repository, _, tag = request.image.rpartition(":")
        push_tail = LogTail("docker push")
        digest: str | None = None
        for chunk in client.api.push(repository, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                push_tail(str(chunk["error"]))
                raise BuildFailed(f"docker push of {request.image} failed", tuple(push_tail.lines))
            if "status" in chunk and "progressDetail" not in chunk:
                push_tail(str(chunk["status"]))
            digest = (chunk.get("aux") or {}).get("Digest", digest)
        return BuildOutput(digest, base_digest)
