"""The Docker engine through the docker SDK: the laptop path, where a daemon is already running."""

from __future__ import annotations

import tempfile

from airflow_provider_trainium.image.builders.base import BuildRequest, LogTail
from airflow_provider_trainium.image.errors import BuilderUnavailable, BuildFailed


class DockerEngineBuilder:
    """Sends the staged context as a tar to the engine, then pushes with the registry's credentials."""

    name = "docker"

    def __init__(self, base_url: str | None = None, timeout: int = 3600) -> None:
        self.base_url = base_url
        self.timeout = timeout

    def _client(self):  # type: ignore[no-untyped-def]
        try:
            from docker.errors import DockerException

            import docker
        except ImportError:
            raise BuilderUnavailable("the docker SDK is not installed (pip install docker)") from None
        try:
            if self.base_url:
                client = docker.DockerClient(base_url=self.base_url, timeout=self.timeout)
            else:
                client = docker.from_env(timeout=self.timeout)
            client.ping()
        except DockerException as exc:
            raise BuilderUnavailable(
                f"no Docker engine reachable ({exc}); choose builder='buildah' or 'codebuild'"
            ) from None
        return client

    def build(self, request: BuildRequest) -> str | None:
        client = self._client()
        for auth in request.auths:
            client.login(username=auth.username, password=auth.password, registry=auth.host, reauth=True)
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
        return digest
