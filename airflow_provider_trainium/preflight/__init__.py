"""Preflight: everything a first real run depends on, checked before anything is paid for.

``airflow trainium preflight`` prints it; a DAG's first task calls :func:`run_preflight` and fails on
:func:`errors`.
"""

from airflow_provider_trainium.preflight.result import CheckResult, errors
from airflow_provider_trainium.preflight.run import CHECKS, run_preflight

__all__ = ["CHECKS", "CheckResult", "errors", "run_preflight"]
