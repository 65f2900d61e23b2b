"""The Airflow asset that stands for a registered model, and the model-name rule it is built on.

A DAG file declares a registration task with this asset as its outlet and has the model's name checked while it
is parsed; both live here, outside ``registry/``, so that declaring the task loads none of the registry (which
re-exports them: ``registry.assets.model_asset``, ``registry.names.validate_model_name``).
"""

from __future__ import annotations

import re

from airflow.sdk import Asset

#: ``x-`` marks a scheme with no URI normalizer: Airflow then leaves the URI alone instead of loading every
#: provider's asset handlers (the amazon one imports boto3) while a DAG file is parsed.
SCHEME = "x-trainium-model"
#: Names become S3 keys, file names and asset URIs, so only a small, lower-case alphabet is allowed.
MODEL_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9_-]|\.(?!\.)){0,127}$")


def validate_model_name(name: str) -> str:
    """``name`` when the registry accepts it as a model name, else ``registry.InvalidNameError``."""
    if not isinstance(name, str) or not MODEL_NAME_RE.match(name) or name.endswith("."):
        from airflow_provider_trainium.registry.errors import InvalidNameError

        raise InvalidNameError(
            f"invalid model name {name!r}: use 1-128 characters from a-z, 0-9, '-', '_' and '.', "
            "starting with a letter or digit (no '..', no trailing '.')"
        )
    return name


def model_asset(name: str) -> Asset:
    """``x-trainium-model://<name>``: one asset per model, whatever the registry root.

    Downstream DAGs schedule on it (``schedule=[model_asset("mnist-mlp")]``) and read the version,
    its URI and metrics from the triggering event's extra.
    """
    validate_model_name(name)
    return Asset(name=f"{SCHEME}://{name}", uri=f"{SCHEME}://{name}", group="model")
