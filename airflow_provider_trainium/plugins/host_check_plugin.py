"""The Airflow plugin that puts ``HostCheckMiddleware`` in front of the API server when it is configured.

Registered through the ``airflow.plugins`` entry point; with ``[trainium] api_allowed_hosts`` unset it adds
nothing, so installing the provider forces no Host policy on a deployment that has its own.
"""

from __future__ import annotations

from typing import Any

from airflow.configuration import conf
from airflow.plugins_manager import AirflowPlugin

from airflow_provider_trainium.plugins.host_check import OPTION, SECTION, HostCheckMiddleware, parse_allowed_hosts


def root_middlewares(value: str | None = None) -> list[dict[str, Any]]:
    """The API server's root middlewares for ``value`` (default: the configured allowlist); none when empty."""
    hosts = parse_allowed_hosts(conf.get(SECTION, OPTION, fallback="") if value is None else value)
    if not hosts:
        return []
    return [{"name": "trainium-host-check", "middleware": HostCheckMiddleware, "kwargs": {"allowed_hosts": hosts}}]


class HostCheckPlugin(AirflowPlugin):
    """Answers only requests addressed to an allowed ``Host`` (DNS rebinding defence)."""

    name = "trainium_host_check"
    fastapi_root_middlewares = root_middlewares()
