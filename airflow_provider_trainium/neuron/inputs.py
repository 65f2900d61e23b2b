"""Which URIs a run may read and write: the artifact root, prefixes the connection lists, and registry references.

Data and base models chosen in a run's conf are read with the job role (or the worker's own rights on local
compute) and end up in registered artifacts, so a URI outside those prefixes (``file:///etc/...``, a path
outside the root, ``https://...``) is refused before any job. The trainer repeats the check
(``trainium_trainer/common/inputs.py``) with the prefixes the provider passes in ``ALLOWED_PREFIXES_ENV``.

What a job writes (its ``output_uri``, ``checkpoint_uri`` and ``code_uri``) is bounded the same way, by the artifact
root and the connection's ``allowed_output_prefixes``: a prefix the connection lets runs *read* (a shared data
set, the fine-tune hold-out set) is not one a run may write, or a templated ``output_uri`` would overwrite it.
Both rules compare in ``boundary.normalize_input_uri``'s form, a local path through its symbolic links
(``os.path.realpath``), the URI and the prefixes alike. Pure string rules: no storage is written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from trainium_trainer import boundary

ALLOWED_PREFIXES_ENV = boundary.ENV_ALLOWED_INPUT_PREFIXES
RULE = "bounded inputs: a run reads only under the artifact root, the connection's allowed_input_prefixes"
WRITE_RULE = "bounded writes: a job writes only under the artifact root and the connection's allowed_output_prefixes"
#: The URIs of a job spec the write rule bounds (``operators.job_checks.check_write_uris``).
WRITE_FIELDS = ("output_uri", "checkpoint_uri", "code_uri")


class InputNotAllowedError(ValueError):
    """An input URI outside every allowed prefix; the message names the rule and the prefixes."""


class WriteNotAllowedError(ValueError):
    """A URI a job would write outside the artifact root and every allowed output prefix."""


def normalize(uri: str) -> str:
    """``scheme://path`` with plain paths as ``file://`` (the trainer's form too: ``boundary.normalize_input_uri``);
    ``..`` segments are refused, not resolved; a local path through its links."""
    try:
        return boundary.normalize_input_uri(uri)
    except ValueError as err:
        raise InputNotAllowedError(f"input {err} ({RULE})") from None


def allowed_prefixes(artifact_root: str, extra: Iterable[str] = ()) -> list[str]:
    return [normalize(p) for p in (artifact_root, *extra) if p and p.strip()]


def is_under(uri: str, prefixes: Iterable[str]) -> bool:
    try:
        return boundary.input_uri_allowed(uri, prefixes)
    except ValueError as err:
        raise InputNotAllowedError(f"input {err} ({RULE})") from None


def check_input(name: str, uri: str, prefixes: Iterable[str]) -> str:
    """``uri`` when it lies under one of ``prefixes``; else InputNotAllowedError naming the field and rule."""
    prefixes = list(prefixes)
    try:
        inside = is_under(uri, prefixes)
    except InputNotAllowedError as err:
        raise InputNotAllowedError(f"{name}: {err}") from None
    if not inside:
        raise InputNotAllowedError(
            f"{name} {uri!r} refused: {RULE}, or a registry reference; allowed prefixes: {', '.join(prefixes)}; "
            "to read another prefix, add it to the trainium connection's allowed_input_prefixes"
        )
    return uri


def check_write(name: str, uri: str, prefixes: Iterable[str]) -> str:
    """``uri`` when a job may write it (under one of ``prefixes``, by the inputs' comparison); else
    WriteNotAllowedError naming the field, the URI, the rule and the connection field that allows a prefix."""
    prefixes = list(prefixes)
    try:
        inside = boundary.input_uri_allowed(uri, prefixes)
    except ValueError as err:
        raise WriteNotAllowedError(f"{name} {err} ({WRITE_RULE})") from None
    if not inside:
        raise WriteNotAllowedError(
            f"{name} {uri!r} refused: {WRITE_RULE}; allowed prefixes: {', '.join(prefixes)}; to write another "
            "prefix, add it to the trainium connection's allowed_output_prefixes"
        )
    return uri


def prefixes_env(prefixes: Iterable[str]) -> dict[str, str]:
    """The environment entry the trainer reads its allowed prefixes from."""
    return {ALLOWED_PREFIXES_ENV: json.dumps(list(prefixes), separators=(",", ":"))}


def prefixes_from_env(environ: dict[str, str] | None = None) -> list[str]:
    raw = (environ if environ is not None else os.environ).get(ALLOWED_PREFIXES_ENV, "")
    return [str(p) for p in json.loads(raw)] if raw else []
