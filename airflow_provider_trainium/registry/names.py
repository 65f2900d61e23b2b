"""Model names, alias names and references (``name``, ``name:3``, ``name@production``).

Names become S3 keys, file names and asset URIs, so only a small, lower-case alphabet is allowed.
Aliases must start with a letter so that ``name@3`` can never be confused with a version number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# the model-name rule belongs to model_asset (light: a DAG file checks a name without the registry)
from airflow_provider_trainium.model_asset import MODEL_NAME_RE, validate_model_name
from airflow_provider_trainium.registry.errors import InvalidNameError

__all__ = [
    "ALIAS_RE",
    "MODEL_NAME_RE",
    "InvalidNameError",
    "ModelRef",
    "parse_ref",
    "validate_alias",
    "validate_model_name",
    "validate_version",
]

ALIAS_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


def validate_alias(alias: str) -> str:
    if not isinstance(alias, str) or not ALIAS_RE.match(alias):
        raise InvalidNameError(
            f"invalid alias {alias!r}: use 1-64 characters from a-z, 0-9, '-' and '_', starting with a letter"
        )
    return alias


def validate_version(version: int | str) -> int:
    text = str(version)
    if isinstance(version, bool) or not text.isdigit() or int(text) < 1:
        raise InvalidNameError(f"invalid version {version!r}: versions are integers 1, 2, 3, ...")
    return int(text)


@dataclass(frozen=True)
class ModelRef:
    """What a user typed: a model, optionally pinned to a version or an alias (never both)."""

    name: str
    version: int | None = None
    alias: str | None = None

    def __str__(self) -> str:
        if self.version is not None:
            return f"{self.name}:{self.version}"
        if self.alias is not None:
            return f"{self.name}@{self.alias}"
        return self.name


def parse_ref(text: str) -> ModelRef:
    """``mnist-mlp`` (newest version), ``mnist-mlp:3`` or ``mnist-mlp@production``."""
    if "@" in text:
        name, alias = text.split("@", 1)
        return ModelRef(validate_model_name(name), alias=validate_alias(alias))
    if ":" in text:
        name, version = text.split(":", 1)
        return ModelRef(validate_model_name(name), version=validate_version(version))
    return ModelRef(validate_model_name(text))
