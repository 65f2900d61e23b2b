"""The Neuron training image: hash the context into a tag, reuse what the registry has, build the rest."""

from __future__ import annotations

from airflow_provider_trainium.image.container_registry import EcrRegistry, OciRegistry, RegistryAuth, parse_repository
from airflow_provider_trainium.image.context import BuildContext, StagedContext
from airflow_provider_trainium.image.ensure import ImageResult, ensure_image
from airflow_provider_trainium.image.errors import (
    BuilderUnavailable,
    BuildFailed,
    ContainerRegistryError,
    ContainerRegistryUnreachable,
    ContextError,
    ImageError,
)

__all__ = [
    "BuildContext",
    "BuildFailed",
    "BuilderUnavailable",
    "ContextError",
    "EcrRegistry",
    "ImageError",
    "ImageResult",
    "OciRegistry",
    "RegistryAuth",
    "ContainerRegistryError",
    "ContainerRegistryUnreachable",
    "StagedContext",
    "ensure_image",
    "parse_repository",
]
