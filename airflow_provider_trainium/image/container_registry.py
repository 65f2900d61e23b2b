"""Registries the image goes to: Amazon ECR (through the amazon provider's EcrHook) or a plain OCI registry.

Both answer the one question that saves a build, "does this tag exist, and with which digest?", and hand the
builders short-lived credentials that are never logged.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from airflow_provider_trainium.image.errors import ContainerRegistryError, ContainerRegistryUnreachable

if TYPE_CHECKING:
    from airflow.providers.amazon.aws.hooks.ecr import EcrHook

log = logging.getLogger(__name__)

#: Manifest types we accept when asking for a tag; the digest of what the registry stores is returned.
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
ECR_URI = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/(?P<name>.+)$")
_REPO_NAME = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")


@dataclass(frozen=True)
class RegistryAuth:
    """Credentials for one registry host; the password never appears in repr or logs."""

    host: str
    username: str
    password: str = field(repr=False)


class ContainerRegistry(Protocol):
    """What the image pipeline needs from a registry."""

    @property
    def repository(self) -> str:
        """Repository reference without tag, e.g. ``123456789012.dkr.ecr.us-east-1.amazonaws.com/trn``."""
        ...

    @property
    def insecure(self) -> bool:
        """True for a plain-HTTP registry (tests, local mirrors)."""
        ...

    def lookup(self, tag: str) -> str | None:
        """The manifest digest (``sha256:...``) stored under ``tag``, or None if the tag does not exist."""
        ...

    def auths(self) -> list[RegistryAuth]:
        """Credentials the builders use to push (and to pull bases from the same registry)."""
        ...


class OciRegistry:
    """A registry speaking the OCI distribution API (docker-registry, Harbor, a pull-through mirror)."""

    def __init__(
        self,
        repository: str,
        *,
        insecure: bool = False,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        host, _, name = repository.partition("/")
        if not name or not ("." in host or ":" in host or host == "localhost"):
            raise ContainerRegistryError(f"repository {repository!r} must be HOST[:PORT]/NAME for an OCI registry")
        if not _REPO_NAME.match(name):
            raise ContainerRegistryError(f"repository name {name!r} is not a valid OCI repository name")
        self.host, self.name = host, name
        self._insecure = insecure
        self._username, self._password = username, password
        self._timeout = timeout

    @property
    def repository(self) -> str:
        return f"{self.host}/{self.name}"

    @property
    def insecure(self) -> bool:
        return self._insecure

    def lookup(self, tag: str) -> str | None:
        import requests

        scheme = "http" if self._insecure else "https"
        url = f"{scheme}://{self.host}/v2/{self.name}/manifests/{tag}"
        auth = (self._username, self._password) if self._username else None
        try:
            response = requests.head(
                url, headers={"Accept": ", ".join(MANIFEST_TYPES)}, auth=auth, timeout=self._timeout
            )
        except requests.RequestException as exc:
            raise ContainerRegistryUnreachable(
                f"registry {self.host} is unreachable ({url}): {type(exc).__name__}"
            ) from None
        if response.status_code == 404:
            return None
        if response.status_code in (401, 403):
            raise ContainerRegistryError(
                f"registry {self.host} refused access to {self.name} (HTTP {response.status_code})"
            )
        if response.status_code != 200:
            raise ContainerRegistryError(f"registry {self.host} answered HTTP {response.status_code} for {url}")
        digest = response.headers.get("Docker-Content-Digest")
        if not digest:
            raise ContainerRegistryError(f"registry {self.host} did not return a Docker-Content-Digest for {tag}")
        return digest

    def auths(self) -> list[RegistryAuth]:
        if not self._username:
            return []
        return [RegistryAuth(self.host, self._username, self._password or "")]


class EcrRegistry:
    """An Amazon ECR repository, reached only through the amazon provider's EcrHook and its AWS connection."""

    def __init__(self, repository_name: str, *, aws_conn_id: str | None, region_name: str | None = None) -> None:
        if not _REPO_NAME.match(repository_name):
            raise ContainerRegistryError(f"ECR repository name {repository_name!r} is not valid")
        self.name = repository_name
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self._described: dict[str, str] | None = None

    @property
    def hook(self) -> EcrHook:
        from airflow.providers.amazon.aws.hooks.ecr import EcrHook

        return EcrHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)

    def _call(self, what: str, fn, **kwargs):  # type: ignore[no-untyped-def]
        from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

        try:
            return fn(**kwargs)
        except EndpointConnectionError as exc:
            raise ContainerRegistryUnreachable(f"ECR endpoint unreachable during {what}: {exc}") from None
        except ClientError:
            raise
        except BotoCoreError as exc:
            raise ContainerRegistryError(f"ECR {what} failed: {exc}") from None

    def describe(self) -> dict[str, str]:
        """registryId and repositoryUri of the repository; a clear error if it does not exist."""
        if self._described is None:
            client = self.hook.conn
            try:
                response = self._call("DescribeRepositories", client.describe_repositories, repositoryNames=[self.name])
            except client.exceptions.RepositoryNotFoundException:
                raise ContainerRegistryError(
                    f"ECR repository {self.name!r} does not exist in {client.meta.region_name}; "
                    "create it (the base CloudFormation stack does) or set ecr_repository in the "
                    "trainium connection"
                ) from None
            repo = response["repositories"][0]
            self._described = {"registryId": repo["registryId"], "repositoryUri": repo["repositoryUri"]}
        return self._described

    @property
    def repository(self) -> str:
        return self.describe()["repositoryUri"]

    @property
    def registry_id(self) -> str:
        return self.describe()["registryId"]

    @property
    def insecure(self) -> bool:
        return False

    def lookup(self, tag: str) -> str | None:
        client = self.hook.conn
        registry_id = self.registry_id
        try:
            response = self._call(
                "DescribeImages",
                client.describe_images,
                registryId=registry_id,
                repositoryName=self.name,
                imageIds=[{"imageTag": tag}],
            )
        except client.exceptions.ImageNotFoundException:
            return None
        details = response.get("imageDetails") or []
        return details[0]["imageDigest"] if details else None

    def auths(self) -> list[RegistryAuth]:
        creds = self.hook.get_temporary_credentials(registry_ids=[self.registry_id])
        return [RegistryAuth(c.registry, c.username, c.password) for c in creds]


def parse_repository(
    repository: str, *, aws_conn_id: str | None, region_name: str | None, insecure: bool = False
) -> ContainerRegistry:
    """ECR for an ECR URI or a bare repository name, a plain OCI registry for ``host[:port]/name``."""
    match = ECR_URI.match(repository)
    if match:
        return EcrRegistry(match["name"], aws_conn_id=aws_conn_id, region_name=match["region"])
    host = repository.partition("/")[0]
    if "/" in repository and ("." in host or ":" in host or host == "localhost"):
        return OciRegistry(repository, insecure=insecure)
    return EcrRegistry(repository, aws_conn_id=aws_conn_id, region_name=region_name)
