"""Subcommands of ``airflow-trainium`` (see :mod:`airflow_provider_trainium.cli`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.cli.cli_config import Arg


def airflow_arg(flags: tuple[str, ...], kwargs: Mapping[str, Any]) -> Arg:
    """One option of an ``airflow trainium`` command: the argparse flags and keywords as Airflow's CLI takes them."""
    from airflow.cli.cli_config import Arg

    return Arg(flags, **kwargs)
