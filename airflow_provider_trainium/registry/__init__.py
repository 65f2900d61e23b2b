"""Model registry over Airflow's ObjectStoragePath: the same code for ``file://`` and ``s3://`` roots."""

from __future__ import annotations

from airflow_provider_trainium.registry.names import InvalidNameError, ModelRef, parse_ref
from airflow_provider_trainium.registry.registry import (
    AliasState,
    ModelRegistry,
    ModelVersion,
    NotFoundError,
    RegisterResult,
    RegistryError,
    SourceChangedError,
    VerifyReport,
)

__all__ = [
    "AliasState",
    "InvalidNameError",
    "ModelRef",
    "ModelRegistry",
    "ModelVersion",
    "NotFoundError",
    "RegisterResult",
    "RegistryError",
    "SourceChangedError",
    "VerifyReport",
    "parse_ref",
]
