"""Secrets by reference: a job names where a secret lives, never its value.

A reference is a Secrets Manager ARN (``arn:aws:secretsmanager:<region>:<account>:secret:<name>``, optionally
with ECS's ``:<json-key>:<version-stage>:<version-id>`` suffix), an SSM Parameter Store ARN
(``arn:aws:ssm:<region>:<account>:parameter/<name>``) or ``ssm:<name>`` for a parameter of the job's own region.
ECS and Batch render them as the container's ``secrets`` (``valueFrom``), which their agents resolve with the
task execution role; local compute resolves them through the ``trainium`` connection's AWS connection and puts
the value in the process's environment only. The spec, a definition's ``environment``, the logs and XCom only
ever see the reference.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_SSM_ARN = re.compile(r"^arn:aws[a-z-]*:ssm:[a-z0-9-]+:\d{12}:parameter/[A-Za-z0-9/_.-]+$")
#: The secret's own ARN, then ECS's optional ``:<json-key>:<version-stage>:<version-id>`` (each may be empty).
_SECRETS_MANAGER_ARN = re.compile(
    r"^(?P<arn>arn:aws[a-z-]*:secretsmanager:(?P<region>[a-z0-9-]+):\d{12}:secret:[A-Za-z0-9/_+=.@!-]+)"
    r"(?::(?P<json_key>[^:]*)(?::(?P<version_stage>[^:]*)(?::(?P<version_id>[^:]*))?)?)?$"
)
_SSM_NAME = re.compile(r"^ssm:(/?[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*)$")


def reference_problem(reference: str) -> str | None:
    """Why ``reference`` is not a secret reference (None when it is one). The message never repeats what was
    given: a string that is no reference may be the secret's value itself."""
    if not isinstance(reference, str):
        return f"a secret reference must be a string, got {type(reference).__name__}"
    if _SECRETS_MANAGER_ARN.match(reference) or _SSM_ARN.match(reference) or _SSM_NAME.match(reference):
        return None
    return (
        "is not a Secrets Manager ARN (arn:aws:secretsmanager:...), an SSM parameter ARN "
        "(arn:aws:ssm:...:parameter/...) or ssm:<parameter name>; a job's secrets are references, never values"
    )


def secret_problems(secrets: Mapping[str, str], env_names: Iterable[str] = ()) -> list[str]:
    """Every reason the references in ``secrets`` (name -> reference) cannot be given to a job whose env sets
    ``env_names`` (the names themselves are the spec's to check, by its env rule)."""
    found: list[str] = []
    clashes = sorted(set(secrets) & set(env_names))
    if clashes:
        found.append(f"secrets and env both set {', '.join(clashes)}")
    for name, reference in secrets.items():
        problem = reference_problem(reference)
        if problem:
            found.append(f"the reference of secret {name} {problem}")
    return found


def value_from(reference: str) -> str:
    """The ``valueFrom`` ECS and Batch take for ``reference``: the ARN, or the parameter's name."""
    match = _SSM_NAME.match(reference)
    return match.group(1) if match else reference


def container_secrets(secrets: Mapping[str, str]) -> list[dict[str, str]]:
    """The container definition's ``secrets`` (ECS and Batch share the shape), sorted by name."""
    return [{"name": name, "valueFrom": value_from(secrets[name])} for name in sorted(secrets)]


@dataclass(frozen=True)
class SecretLocation:
    """Where a reference points, in the words of the API that reads it (local compute reads it itself).

    :param service: ``secretsmanager`` or ``ssm``.
    :param secret_id: the secret's ARN (GetSecretValue ``SecretId``) or the parameter's ARN or name
        (GetParameter ``Name`` takes either).
    :param region_name: the ARN's region; None for ``ssm:<name>``, which lives in the job's own region.
    """

    service: str
    secret_id: str
    region_name: str | None = None
    json_key: str | None = None
    version_stage: str | None = None
    version_id: str | None = None


def secret_location(reference: str) -> SecretLocation:
    """Parse a valid reference the way the ECS agent does (``docs``: ECS "Pass Secrets Manager secrets
    programmatically": ``arn:...:secret:<name>:<json-key>:<version-stage>:<version-id>``)."""
    problem = reference_problem(reference)
    if problem:
        raise ValueError(f"secret reference {problem}")
    if match := _SSM_NAME.match(reference):
        return SecretLocation("ssm", match.group(1))
    if _SSM_ARN.match(reference):
        return SecretLocation("ssm", reference, region_name=reference.split(":")[3])
    parts = _SECRETS_MANAGER_ARN.match(reference)
    assert parts is not None  # reference_problem matched it
    return SecretLocation(
        "secretsmanager",
        parts["arn"],
        region_name=parts["region"],
        json_key=parts["json_key"] or None,
        version_stage=parts["version_stage"] or None,
        version_id=parts["version_id"] or None,
    )
