"""What the events of a registered model's asset carry, and OpenLineage's names for registry locations.

The asset itself (``model_asset``, ``SCHEME``) is :mod:`airflow_provider_trainium.model_asset`'s, re-exported here.
"""

from __future__ import annotations

from typing import Any

# the asset and its scheme belong to model_asset (light: a DAG file declares the asset without the registry)
from airflow_provider_trainium.model_asset import SCHEME, model_asset

__all__ = ["SCHEME", "event_extra", "model_asset", "openlineage_id"]


def event_extra(result: dict[str, Any], metrics: dict[str, Any] | None, registry_root: str) -> dict[str, Any]:
    """Asset event extra: the registration result, the registry root and the scalar metrics."""
    from airflow_provider_trainium.registry.manifest import scalar_metrics

    return {**result, "registry": registry_root, "metrics": scalar_metrics(metrics)}


def openlineage_id(uri: str) -> tuple[str, str]:
    """OpenLineage dataset naming: ``s3://bucket`` + key, ``file`` + path."""
    scheme, _, rest = uri.partition("://")
    if not rest:
        return "file", uri
    if scheme == "file":
        return "file", rest
    bucket, _, key = rest.partition("/")
    return f"{scheme}://{bucket}", key or "/"
