"""The Neuron training image: hash the context into a tag, reuse what the registry has, build the rest."""

from __future__ import annotations

from airflow_provider_trainium.image.context import BuildContext, StagedContext
from airflow_provider_trainium.image.ensure import ImageResult, ensure_image
from airflow_provider_trainium.image.errors import (
    BuilderUnavailable,
    BuildFailed,
    ContextError,
    ImageError,
    RegistryError,
    RegistryUnreachable,
)
from airflow_provider_trainium.image.registry import EcrRegistry, OciRegistry, RegistryAuth, parse_repository

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
    "RegistryError",
    "RegistryUnreachable",
    "StagedContext",
    "ensure_image",
    "parse_repository",
]
