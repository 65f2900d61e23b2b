"""The trainer's own check of its inputs: only URIs under the prefixes the provider allowed.

The provider puts the allowed prefixes (the artifact root and the connection's ``allowed_input_prefixes``) in
``TRAINIUM_ALLOWED_INPUT_PREFIXES`` as a JSON list. A job started without it (a developer running the module
by hand) is not restricted; a job started by the provider always has it.
"""

from __future__ import annotations

import json
import os

from trainium_trainer import boundary
from trainium_trainer.common.errors import BadInputError

ALLOWED_PREFIXES_ENV = boundary.ENV_ALLOWED_INPUT_PREFIXES


class InputNotAllowedError(BadInputError, ValueError):
    """An input outside every allowed prefix: bad input, never retried."""


def check_input(name: str, uri: str | None, environ: dict[str, str] | None = None) -> str | None:
    """``uri`` unchanged when allowed (or when no prefixes were given); else InputNotAllowedError."""
    raw = (environ if environ is not None else os.environ).get(ALLOWED_PREFIXES_ENV, "")
    if not uri or not raw:
        return uri
    prefixes = [str(p) for p in json.loads(raw)]
    try:
        allowed = boundary.input_uri_allowed(uri, prefixes)
    except ValueError as err:
        raise InputNotAllowedError(str(err)) from None
    if not allowed:
        raise InputNotAllowedError(f"{name} {uri!r} is outside the allowed input prefixes {prefixes}")
    return uri
