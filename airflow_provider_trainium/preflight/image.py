"""The image a run would start: trusted by the provider's rule, and present in ECR under its digest.

A digest that is not in the repository fails only when the instances try to pull it, after they were paid
for; an untrusted image is refused by the operator anyway, so preflight says so first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_trainium.preflight.layout import Layout
from airflow_provider_trainium.preflight.result import CheckResult, verdict, warning

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

NAME = "image"
_DIGEST = re.compile(r"^(?P<repository>[^@\s]+)@(?P<digest>sha256:[0-9a-f]{64})$")
_NOT_FOUND = ("ImageNotFoundException", "RepositoryNotFoundException")


@dataclass(frozen=True)
class ImageRef:
    """``<registry>/<name>@sha256:<hex>`` or ``<registry>/<name>:<tag>`` taken apart."""

    repository: str
    digest: str | None = None
    tag: str | None = None


def parse_image(image: str) -> ImageRef:
    match = _DIGEST.match(image)
    if match:
        return ImageRef(match["repository"], digest=match["digest"])
    head, _, tail = image.rpartition(":")
    if head and "/" not in tail:
        return ImageRef(head, tag=tail)
    return ImageRef(image, tag="latest")


def lookup_problem(ref: ImageRef, config: TrainiumConfig) -> str | None:
    """Why ECR does not hold ``ref`` (None when it does, or when ``ref`` is not in ECR at all)."""
    from botocore.exceptions import ClientError

    from airflow_provider_trainium.image.container_registry import EcrRegistry, parse_repository
    from airflow_provider_trainium.image.errors import ContainerRegistryError

    registry = parse_repository(ref.repository, aws_conn_id=config.aws_conn_id, region_name=config.region_name)
    if not isinstance(registry, EcrRegistry):
        return None
    where = f"ECR repository {registry.name} ({registry.region_name})"
    try:
        registry_id = registry.registry_id
    except ContainerRegistryError as err:  # the repository itself does not exist (or the name is invalid)
        return str(err)
    if ref.tag is not None:
        return None if registry.lookup(ref.tag) else f"tag {ref.tag} not found in {where}"
    try:
        registry.hook.conn.describe_images(
            registryId=registry_id, repositoryName=registry.name, imageIds=[{"imageDigest": ref.digest}]
        )
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in _NOT_FOUND:
            return f"digest {ref.digest} not found in {where}: push the image or fix the digest"
        raise
    return None


def is_ecr(ref: ImageRef) -> bool:
    from airflow_provider_trainium.image.container_registry import ECR_URI

    host = ref.repository.partition("/")[0]
    return bool(ECR_URI.match(ref.repository)) or not ("." in host or ":" in host or host == "localhost")


def check_image(config: TrainiumConfig, layout: Layout) -> CheckResult:
    from airflow_provider_trainium.neuron.images import image_problem, trusted_repository

    if not layout.image:
        return warning(
            NAME,
            "no image given and the connection names none: the DAG builds one (TrainiumImageBuildOperator) and "
            "runs exactly that",
        )
    ref = parse_image(layout.image)
    errors: list[str] = []
    warnings: list[str] = []
    untrusted = image_problem(layout.image, trusted_repository(config))
    if untrusted:
        errors.append(untrusted)
    if ref.digest is None:
        warnings.append(f"not pinned: {layout.image} names a tag, which can move")
    if is_ecr(ref):
        missing = lookup_problem(ref, config)
        if missing:
            errors.append(missing)
    else:
        warnings.append(f"not looked up: {ref.repository} is not an ECR repository")
    return verdict(
        NAME, f"{layout.image} is in ECR and trusted (configured repository, pinned by digest)", errors, warnings
    )
