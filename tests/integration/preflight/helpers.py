"""Runs ``airflow-trainium preflight`` in this process, as the console script would."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_provider_trainium.cli import main
from tests.conftest import set_trainium_connection
from tests.integration.preflight.conftest import INSTANCE_TYPE

#: A two-node Batch run: every check applies, the EFA group included.
BATCH = ("--compute", "batch", "--instance-type", INSTANCE_TYPE, "--nodes", "2")
ECS = ("--compute", "ecs", "--instance-type", INSTANCE_TYPE, "--nodes", "1")


def preflight(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, extra: dict[str, Any], *args: str
) -> tuple[int, dict[str, dict[str, str]]]:
    """(exit code, results by check name) of ``preflight -o json`` with ``extra`` as the trainium connection."""
    set_trainium_connection(monkeypatch, **extra)
    capsys.readouterr()
    code = main(["preflight", *(args or BATCH), "-o", "json"])
    rows = json.loads(capsys.readouterr().out)
    return code, {row["name"]: row for row in rows}
