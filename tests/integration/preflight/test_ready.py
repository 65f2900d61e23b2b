"""A deployment as the stacks leave it passes every check; the output is Airflow's CLI output."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from airflow_provider_trainium.cli import main
from airflow_provider_trainium.preflight import CHECKS
from tests.conftest import set_trainium_connection
from tests.integration.preflight.helpers import BATCH, ECS, preflight


def test_a_ready_batch_deployment_passes_every_check(capsys, monkeypatch, deployment):
    code, results = preflight(capsys, monkeypatch, deployment.extra())
    assert code == 0
    assert list(results) == list(CHECKS)
    assert {name: r["status"] for name, r in results.items() if r["status"] != "ok"} == {}
    assert "trn-on-demand" in results["compute environment"]["reason"]
    assert deployment.efa_group in results["efa security group"]["reason"]
    assert results["ecs cluster"]["reason"] == "not needed (batch compute)"


def test_a_ready_ecs_deployment_passes_every_check(capsys, monkeypatch, deployment):
    code, results = preflight(capsys, monkeypatch, deployment.extra(), *ECS)
    assert code == 0
    assert {name: r["status"] for name, r in results.items() if r["status"] != "ok"} == {}
    assert "capacity providers trainium-trn" in results["ecs cluster"]["reason"]
    assert results["efa security group"]["reason"] == "not needed (1 node)"


def test_table_and_yaml_output(capsys, monkeypatch, deployment):
    set_trainium_connection(monkeypatch, **deployment.extra())
    capsys.readouterr()
    assert main(["preflight", *BATCH, "-o", "table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "|", "status", "|", "reason"]
    names = [line.split("|")[0].strip() for line in lines[2:]]
    assert [name for name in names if name] == list(CHECKS)  # a long reason wraps onto unnamed lines

    assert main(["preflight", *BATCH, "-o", "yaml"]) == 0
    assert [row["status"] for row in yaml.safe_load(capsys.readouterr().out)] == ["ok"] * len(CHECKS)


def airflow(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AIRFLOW_CONN_TRAINIUM_DEFAULT"}
    return subprocess.run(
        [sys.executable, "-m", "airflow", "trainium", "preflight", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )


def test_airflow_cli_has_the_preflight_command():
    """Registered through provider info; a failed check is the exit status, and stdout is only the result."""
    done = airflow("--help")
    assert done.returncode == 0, done.stderr
    assert "--instance-type" in done.stdout and "--compute" in done.stdout

    done = airflow(*BATCH, "-o", "json")  # no trainium connection: batch lacks every field it needs
    assert done.returncode == 1, done.stderr
    results = {row["name"]: row for row in json.loads(done.stdout)}
    assert results["connection"]["status"] == "error" and "job_role_arn" in results["connection"]["reason"]
