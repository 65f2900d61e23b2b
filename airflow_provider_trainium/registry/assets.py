"""The Airflow asset that stands for a registered model, and what its events carry."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Asset

from airflow_provider_trainium.registry.names import validate_model_name

#: ``x-`` marks a scheme with no URI normalizer: Airflow then leaves the URI alone instead of loading every
#: provider's asset handlers (the amazon one imports boto3) while a DAG file is parsed.
SCHEME = "x-trainium-model"


def model_asset(name: str) -> Asset:
    """``x-trainium-model://<name>``: one asset per model, whatever the registry root.

    Downstream DAGs schedule on it (``schedule=[model_asset("mnist-mlp")]``) and read the version,
    its URI and metrics from the triggering event's extra.
    """
    validate_model_name(name)
    return Asset(name=f"{SCHEME}://{name}", uri=f"{SCHEME}://{name}", group="model")


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
