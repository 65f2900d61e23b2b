"""Which inputs a run may read: the artifact root, prefixes the connection lists, and registry references.

Data and base models chosen in a run's conf are read with the job role (or the worker's own rights on local
compute) and end up in registered artifacts, so a URI outside those prefixes (``file:///etc/...``, a path
outside the root, ``https://...``) is refused before any job. The trainer repeats the check
(``trainium_trainer/common/inputs.py``) with the prefixes the provider passes in ``ALLOWED_PREFIXES_ENV``.
Pure string rules: no storage is touched.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from trainium_trainer import boundary

ALLOWED_PREFIXES_ENV = boundary.ENV_ALLOWED_INPUT_PREFIXES
RULE = "bounded inputs: a run reads only under the artifact root, the connection's allowed_input_prefixes"


class InputNotAllowedError(ValueError):
    """An input URI outside every allowed prefix; the message names the rule and the prefixes."""


def normalize(uri: str) -> str:
    """``scheme://path`` with plain paths as ``file://`` (the trainer's form too: ``boundary.normalize_input_uri``);
    ``..`` segments are refused, not resolved; a local path through its links."""
    try:
        return boundary.normalize_input_uri(uri)
    except ValueError as err:
        raise InputNotAllowedError(f"{err} ({RULE})") from None


def allowed_prefixes(artifact_root: str, extra: Iterable[str] = ()) -> list[str]:
    return [normalize(p) for p in (artifact_root, *extra) if p and p.strip()]


def is_under(uri: str, prefixes: Iterable[str]) -> bool:
    try:
        return boundary.input_uri_allowed(uri, prefixes)
    except ValueError as err:
        raise InputNotAllowedError(f"{err} ({RULE})") from None


def check_input(name: str, uri: str, prefixes: Iterable[str]) -> str:
    """``uri`` when it lies under one of ``prefixes``; else InputNotAllowedError naming the field and rule."""
    prefixes = list(prefixes)
    try:
        inside = is_under(uri, prefixes)
    except InputNotAllowedError as err:
        raise InputNotAllowedError(f"{name}: {err}") from None
    if not inside:
        raise InputNotAllowedError(
            f"{name} {uri!r} refused: {RULE}, or a registry reference; allowed prefixes: {', '.join(prefixes)}"
        )
    return uri


def prefixes_env(prefixes: Iterable[str]) -> dict[str, str]:
    """The environment entry the trainer reads its allowed prefixes from."""
    return {ALLOWED_PREFIXES_ENV: json.dumps(list(prefixes), separators=(",", ":"))}


def prefixes_from_env(environ: dict[str, str] | None = None) -> list[str]:
    raw = (environ if environ is not None else os.environ).get(ALLOWED_PREFIXES_ENV, "")
    return [str(p) for p in json.loads(raw)] if raw else []
