"""The trainer's own check of its inputs: only URIs under the prefixes the provider allowed.

The provider puts the allowed prefixes (the artifact root and the connection's ``allowed_input_prefixes``) in
``TRAINIUM_ALLOWED_INPUT_PREFIXES`` as a JSON list. A job started without it (a developer running the module
by hand) is not restricted; a job started by the provider always has it.
"""

from __future__ import annotations

import json
import os
import posixpath

from trainium_trainer import boundary
from trainium_trainer.common.errors import BadInputError

ALLOWED_PREFIXES_ENV = boundary.ENV_ALLOWED_INPUT_PREFIXES


class InputNotAllowedError(BadInputError, ValueError):
    """An input outside every allowed prefix: bad input, never retried."""


def _normalize(uri: str) -> str:
    uri = uri.strip()
    if "://" not in uri:
        if not uri.startswith("/"):
            raise InputNotAllowedError(f"input {uri!r} refused: a relative path")
        uri = "file://" + uri
    scheme, _, rest = uri.partition("://")
    if any(part == ".." for part in rest.split("/")):
        raise InputNotAllowedError(f"input {uri!r} refused: '..' segments are not allowed")
    rest = posixpath.normpath(rest) if rest else rest
    if scheme == "file" and not rest.startswith("/"):
        rest = "/" + rest
    return f"{scheme.lower()}://{rest.rstrip('/')}"


def check_input(name: str, uri: str | None, environ: dict[str, str] | None = None) -> str | None:
    """``uri`` unchanged when allowed (or when no prefixes were given); else InputNotAllowedError."""
    raw = (environ if environ is not None else os.environ).get(ALLOWED_PREFIXES_ENV, "")
    if not uri or not raw:
        return uri
    prefixes = [_normalize(str(p)) for p in json.loads(raw)]
    target = _normalize(uri)
    if not any(target == p or target.startswith(p + "/") for p in prefixes):
        raise InputNotAllowedError(f"{name} {uri!r} is outside the allowed input prefixes {prefixes}")
    return uri
