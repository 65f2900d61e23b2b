"""The model registry: immutable, numbered versions of a model's files, with lineage and aliases.

``ModelRegistry`` is one registry root with every operation. Each job lives in its own module: ``reading``
(the layout under the root, versions, aliases, integrity checks), ``publishing`` (registering a version),
``promotion`` (moving an alias), ``transfer`` (verified copies of a file) and ``records`` (the values handed
back). This module puts them together and keeps every name importable from here.
"""

from __future__ import annotations

from airflow_provider_trainium.registry import store
from airflow_provider_trainium.registry.errors import (
    IntegrityError,
    NotFoundError,
    RegistryError,
    SourceChangedError,
)
from airflow_provider_trainium.registry.names import ModelRef, parse_ref
from airflow_provider_trainium.registry.promotion import AliasPromoter
from airflow_provider_trainium.registry.publishing import DEFAULT_DATASET_HASH_MAX_BYTES, RegistryPublisher
from airflow_provider_trainium.registry.records import AliasState, ModelVersion, RegisterResult, VerifyReport
from airflow_provider_trainium.registry.store import MAX_ATTEMPTS

__all__ = [
    "DEFAULT_DATASET_HASH_MAX_BYTES",
    "MAX_ATTEMPTS",
    "AliasState",
    "IntegrityError",
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


class ModelRegistry(RegistryPublisher, AliasPromoter):
    """One registry root. Every method is safe to call concurrently from several processes."""

    def __repr__(self) -> str:
        return f"ModelRegistry({store.uri_of(self.root)!r})"
