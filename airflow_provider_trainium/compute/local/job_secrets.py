"""A job's secret references read on this machine, for local compute (ECS and Batch agents read their own).

Each reference is read through the amazon provider's hooks (``SecretsManagerHook``, ``SsmHook``) on the
``trainium`` connection's AWS connection, the way the ECS agent reads it for a container (a JSON key and a
version stage or id after a Secrets Manager ARN included). Every value read is registered with Airflow's
secret masker at once, so a line a job prints with it shows ``***`` in the task log. A reference that cannot be
read is bad input, and its message names the reference and why, never a value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_trainium.compute.base import JobInputError
from airflow_provider_trainium.neuron.secrets import SecretLocation, secret_location


class SecretNotResolvedError(JobInputError):
    """A secret reference that cannot be read: the job must not start without it, and retrying cannot help."""


class _Unreadable(Exception):
    """Why one reference yields no value (its message names no value)."""


def _error_reason(err: Exception) -> str:
    """A botocore error's code and message (they name the reference, never a value); else the error's type."""
    response = getattr(err, "response", None)
    if isinstance(response, dict) and "Error" in response:
        error = response["Error"]
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
    if isinstance(err, _Unreadable):
        return str(err)
    return f"{type(err).__name__}: {err}"


def _secrets_manager_value(location: SecretLocation, aws_conn_id: str | None, region_name: str | None) -> str:
    from airflow.providers.amazon.aws.hooks.secrets_manager import SecretsManagerHook

    hook = SecretsManagerHook(  # type: ignore[no-untyped-call]  # its __init__(*args, **kwargs) has no annotations
        aws_conn_id=aws_conn_id, region_name=location.region_name or region_name
    )
    value: Any
    if location.version_stage or location.version_id:
        version: dict[str, str] = {}
        if location.version_stage:
            version["VersionStage"] = location.version_stage
        if location.version_id:
            version["VersionId"] = location.version_id
        value = hook.get_conn().get_secret_value(SecretId=location.secret_id, **version).get("SecretString")
    else:
        value = hook.get_secret(location.secret_id)
    if not isinstance(value, str):
        raise _Unreadable("it holds binary data, and ECS and Batch inject only text secrets (SecretString)")
    if location.json_key is None:
        return value
    try:
        document = json.loads(value)
    except ValueError:
        raise _Unreadable(f"it is not a JSON object, so it has no key {location.json_key!r}") from None
    if not isinstance(document, dict) or location.json_key not in document:
        raise _Unreadable(f"its JSON object has no key {location.json_key!r}")
    field = document[location.json_key]
    return field if isinstance(field, str) else json.dumps(field)


def _ssm_value(location: SecretLocation, aws_conn_id: str | None, region_name: str | None) -> str:
    from airflow.providers.amazon.aws.hooks.ssm import SsmHook

    hook = SsmHook(aws_conn_id=aws_conn_id, region_name=location.region_name or region_name)
    return hook.get_parameter_value(location.secret_id)  # GetParameter takes the name or the ARN


def read_reference(reference: str, aws_conn_id: str | None, region_name: str | None = None) -> str:
    """The value ``reference`` points at. ``region_name`` is where ``ssm:<name>`` lives (the job's region)."""
    location = secret_location(reference)
    if location.service == "ssm":
        return _ssm_value(location, aws_conn_id, region_name)
    return _secrets_manager_value(location, aws_conn_id, region_name)


def mask(value: str) -> None:
    """Register ``value`` with every secret masker this process has.

    ``airflow.sdk.log.mask_secret`` masks it in the task process and tells the supervisor, which writes the task
    log on a worker. Where Airflow core is installed too (``dag.test()``, a worker with core), the log lines of
    an in-process run go through core's own masker instead, a separate copy (``airflow.settings`` configures
    both), so the value is given to that one as well.
    """
    from airflow.sdk.log import mask_secret

    mask_secret(value)
    try:
        from airflow._shared.secrets_masker import mask_secret as core_mask_secret
    except ImportError:  # the Task SDK alone: its masker is the only one
        return
    core_mask_secret(value)


def resolve_secrets(
    secrets: Mapping[str, str], aws_conn_id: str | None, region_name: str | None = None
) -> dict[str, str]:
    """name -> value for every reference, each value masked in Airflow's logs before it is returned.

    Every reference is tried, so one failure lists all that cannot be read; nothing is returned then.
    """
    values: dict[str, str] = {}
    problems: list[str] = []
    for name in sorted(secrets):
        reference = secrets[name]
        try:
            value = read_reference(reference, aws_conn_id, region_name)
        except Exception as err:  # noqa: BLE001 - every failure is the same bad input, named with its reason
            problems.append(f"secret {name} ({reference}) could not be read: {_error_reason(err)}")
            continue
        mask(value)
        values[name] = value
    if problems:
        raise SecretNotResolvedError(
            "; ".join(problems) + f" (through AWS connection {aws_conn_id!r}: the trainium connection's aws_conn_id)"
        )
    return values
