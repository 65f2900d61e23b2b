"""Model registry over Airflow's ObjectStoragePath: the same code for ``file://`` and ``s3://`` roots."""

from __future__ import annotations

import importlib
from typing import Any

#: Public names and the module each lives in: imported on first use, so that importing the package stays cheap.
_EXPORTS = {
    "InvalidNameError": "errors",
    "ModelRef": "names",
    "parse_ref": "names",
    "AliasState": "records",
    "IntegrityError": "errors",
    "ModelRegistry": "registry",
    "ModelVersion": "records",
    "NotFoundError": "errors",
    "RegisterResult": "records",
    "RegistryError": "errors",
    "SourceChangedError": "errors",
    "VerifyReport": "records",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
