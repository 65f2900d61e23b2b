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

_SECRETS_MANAGER_ARN = re.compile(
    r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@!-]+(:.*)?$"
)
_SSM_ARN = re.compile(r"^arn:aws[a-z-]*:ssm:[a-z0-9-]+:\d{12}:parameter/[A-Za-z0-9/_.-]+$")
_SSM_NAME = re.compile(r"^ssm:(/?[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*)$")


def reference_problem(reference: str) -> str | None:
    """Why ``reference`` is not a secret reference (None when it is one)."""
    if not isinstance(reference, str):
        return f"a secret reference must be a string, got {type(reference).__name__}"
    if _SECRETS_MANAGER_ARN.match(reference) or _SSM_ARN.match(reference) or _SSM_NAME.match(reference):
        return None
    return (
        f"secret reference {reference!r} is not a Secrets Manager ARN (arn:aws:secretsmanager:...), an SSM "
        "parameter ARN (arn:aws:ssm:...:parameter/...) or ssm:<parameter name>; a job's secrets are references, "
        "never values"
    )


def secret_problems(secrets: Mapping[str, str], env_names: Iterable[str] = ()) -> list[str]:
    """Every reason the references in ``secrets`` (name -> reference) cannot be given to a job whose env sets
    ``env_names`` (the names themselves are the spec's to check, by its env rule)."""
    found: list[str] = []
    clashes = sorted(set(secrets) & set(env_names))
    if clashes:
        found.append(f"secrets and env both set {', '.join(clashes)}")
    for reference in secrets.values():
        problem = reference_problem(reference)
        if problem:
            found.append(problem)
    return found


def value_from(reference: str) -> str:
    """The ``valueFrom`` ECS and Batch take for ``reference``: the ARN, or the parameter's name."""
    match = _SSM_NAME.match(reference)
    return match.group(1) if match else reference


def container_secrets(secrets: Mapping[str, str]) -> list[dict[str, str]]:
    """The container definition's ``secrets`` (ECS and Batch share the shape), sorted by name."""
    return [{"name": name, "valueFrom": value_from(secrets[name])} for name in sorted(secrets)]
