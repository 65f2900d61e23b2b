"""Runs one check so that its failure (a client error, a missing permission, a bad table value) is that
check's error and every other check still runs, as the connection's Test button does."""

from __future__ import annotations

from collections.abc import Callable

from airflow_provider_trainium.hooks.connection_test import _error
from airflow_provider_trainium.preflight.result import CheckResult, error


def guarded(name: str, check: Callable[[], CheckResult]) -> CheckResult:
    try:
        return check()
    except Exception as err:  # each check reports its own failure; the others still run
        return error(name, _error(err))
