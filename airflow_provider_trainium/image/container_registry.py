"""Registries the image goes to: Amazon ECR (through the amazon provider's EcrHook) or a plain OCI registry.

Both answer the one question that saves a build, "does this tag exist, and with which digest?", and hand the
builders short-lived credentials that are never logged.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_trainium.image.errors import ContainerRegistryError, ContainerRegistryUnreachable

if TYPE_CHECKING:
    from collections.abc import Callable

    import requests
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

    def labels(self, tag: str) -> dict[str, str] | None:
        """The image config's labels under ``tag``; None when the image or its config cannot be read."""
        ...


def platform_manifest(index: dict[str, Any], os: str = "linux", architecture: str = "amd64") -> str | None:
    """The digest of the index entry for the platform the training image runs on."""
    for entry in index.get("manifests") or []:
        platform = entry.get("platform") or {}
        if platform.get("os") == os and platform.get("architecture") == architecture:
            return str(entry.get("digest"))
    return None


def config_labels(config: dict[str, Any] | None) -> dict[str, str] | None:
    """``config.Labels`` of an image config blob (an image without labels has an empty dict)."""
    if config is None:
        return None
    labels = (config.get("config") or {}).get("Labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


#: Hosts a plain-HTTP registry may get credentials on: the traffic never leaves this machine.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})


def hostname(host: str) -> str:
    """``host`` without its port: ``registry:5000`` -> ``registry``, ``[::1]:5000`` -> ``[::1]``."""
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.partition(":")[0]


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
        if insecure and username and hostname(host) not in LOOPBACK_HOSTS:
            raise ContainerRegistryError(
                f"registry {host} is insecure (plain HTTP): credentials are sent only over HTTPS, or to this machine"
            )
        self.host, self.name = host, name
        self._insecure = insecure
        self._username, self._password = username, password
        self._timeout = timeout
        self._token: str | None = None

    @property
    def repository(self) -> str:
        return f"{self.host}/{self.name}"

    @property
    def insecure(self) -> bool:
        return self._insecure

    def _request(self, method: str, path: str, accept: str | None = None) -> requests.Response:
        """One call to ``/v2/<name>/<path>``, answering a bearer-token challenge once; unreachable is raised."""
        import requests

        from airflow_provider_trainium.image.registry_token import fetch_token, parse_challenge

        scheme = "http" if self._insecure else "https"
        url = f"{scheme}://{self.host}/v2/{self.name}/{path}"
        headers = {"Accept": accept} if accept else {}
        login = (self._username, self._password or "") if self._username else None
        try:
            if self._token:
                headers["Authorization"] = f"Bearer {self._token}"
                response = requests.request(method, url, headers=headers, timeout=self._timeout)
            else:
                response = requests.request(method, url, headers=headers, auth=login, timeout=self._timeout)
            challenge = parse_challenge(response.headers.get("WWW-Authenticate", ""))
            if response.status_code == 401 and challenge is not None:
                self._token = fetch_token(challenge, login, self._timeout)
                headers["Authorization"] = f"Bearer {self._token}"
                response = requests.request(method, url, headers=headers, timeout=self._timeout)
        except requests.RequestException as exc:
            raise ContainerRegistryUnreachable(
                f"registry {self.host} is unreachable ({url}): {type(exc).__name__}"
            ) from None
        if response.status_code in (401, 403):
            raise ContainerRegistryError(
                f"registry {self.host} refused access to {self.name} (HTTP {response.status_code})"
            )
        if response.status_code not in (200, 404):
            raise ContainerRegistryError(f"registry {self.host} answered HTTP {response.status_code} for {url}")
        return response

    def lookup(self, tag: str) -> str | None:
        response = self._request("HEAD", f"manifests/{tag}", ", ".join(MANIFEST_TYPES))
        if response.status_code == 404:
            return None
        digest = response.headers.get("Docker-Content-Digest")
        if not digest:
            raise ContainerRegistryError(f"registry {self.host} did not return a Docker-Content-Digest for {tag}")
        return digest

    def _json(self, path: str, accept: str | None = None) -> dict[str, Any] | None:
        response = self._request("GET", path, accept)
        if response.status_code == 404:
            return None
        try:
            body = response.json()
        except ValueError:
            raise ContainerRegistryError(f"registry {self.host} answered {path} with something not JSON") from None
        return body if isinstance(body, dict) else None

    def labels(self, tag: str) -> dict[str, str] | None:
        """The image config's labels for ``tag`` (linux/amd64 of an index); None if there is no such image."""
        manifest = self._json(f"manifests/{tag}", ", ".join(MANIFEST_TYPES))
        if manifest is not None and "manifests" in manifest:
            platform = platform_manifest(manifest)
            manifest = self._json(f"manifests/{platform}", ", ".join(MANIFEST_TYPES)) if platform else None
        config_digest = ((manifest or {}).get("config") or {}).get("digest")
        if not config_digest:
            return None
        config = self._json(f"blobs/{config_digest}")
        return config_labels(config)

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

    def _call(self, what: str, fn: Callable[..., dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
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

    def labels(self, tag: str) -> dict[str, str] | None:
        """BatchGetImage for the manifest, then the config blob through a layer download URL; None when ECR
        (or an endpoint that lacks the call) does not hand the config out: the labels are a nicety."""
        import requests
        from botocore.exceptions import BotoCoreError, ClientError

        client = self.hook.conn
        try:
            images = (
                client.batch_get_image(
                    registryId=self.registry_id,
                    repositoryName=self.name,
                    imageIds=[{"imageTag": tag}],
                    acceptedMediaTypes=[t for t in MANIFEST_TYPES if "index" not in t and "list" not in t],
                ).get("images")
                or []
            )
            if not images:
                return None
            manifest = json.loads(images[0]["imageManifest"])
            config_digest = manifest["config"]["digest"]
            url = client.get_download_url_for_layer(
                registryId=self.registry_id, repositoryName=self.name, layerDigest=config_digest
            )["downloadUrl"]
            response = requests.get(url, timeout=30)
            response.raise_for_status()
            return config_labels(response.json())
        except (BotoCoreError, ClientError, requests.RequestException, KeyError, TypeError, ValueError) as exc:
            log.info("labels of %s:%s not readable from ECR (%s); base digest unknown", self.name, tag, exc)
            return None

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
