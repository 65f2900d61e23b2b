"""Model commands: ``airflow-trainium models`` in process, ``airflow trainium models`` as users run it.

Exit codes: 0 success, 1 a refusal or failed check (missing model, alias or version), 2 bad usage.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from airflow_provider_trainium.cli import main

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\S+ \[\w+\s*\]")


def _run(capsys, backend, *args):
    """In-process run. Airflow's logging is already set up by the test session and prints on stdout,
    so its lines are dropped here; the subprocess tests check the real commands."""
    subcommand, *rest = args
    conn = ["--aws-conn-id", backend.conn_id] if backend.conn_id else []
    code = main(["models", subcommand, "--root", backend.root_uri, *conn, *rest])
    out = capsys.readouterr()
    stdout = "".join(line for line in out.out.splitlines(keepends=True) if not LOG_LINE.match(line))
    return code, stdout, out.err


def test_cli_list_show_promote_verify(capsys, backend, registry, trained_dir):
    registry.register("mnist-mlp", trained_dir("a")[0], lineage={"dag_id": "d", "run_id": "r1"})
    v2 = registry.register("mnist-mlp", trained_dir("b")[0]).version

    code, out, _ = _run(capsys, backend, "list")
    assert code == 0 and [c.strip() for c in out.split("\n")[2].split("|")[:3]] == ["mnist-mlp", "2", "2"]

    assert _run(capsys, backend, "promote", "mnist-mlp", "production", "1")[0] == 0
    code, out, _ = _run(capsys, backend, "list", "mnist-mlp", "--output", "json")
    rows = json.loads(out)
    assert [(r["version"], r["aliases"], r["dag_id"]) for r in rows] == [
        (1, ["production"], "d"),
        (2, [], None),
    ]
    code, out, _ = _run(capsys, backend, "list", "mnist-mlp", "-o", "yaml")
    assert [r["version"] for r in yaml.safe_load(out)] == [1, 2]

    code, out, _ = _run(capsys, backend, "show", "mnist-mlp@production")
    shown = json.loads(out)
    assert shown["version"] == 1 and shown["source"]["run_id"] == "r1"

    code, out, err = _run(capsys, backend, "promote", "mnist-mlp", "production", "9")
    assert code == 1 and "no version 9" in err
    code, out, err = _run(capsys, backend, "promote", "mnist-mlp", "Bad Alias", "1")
    assert code == 2 and "invalid alias" in err

    assert _run(capsys, backend, "promote", "mnist-mlp", "production", "2")[0] == 0
    code, out, _ = _run(capsys, backend, "history", "mnist-mlp", "production", "--json")
    assert [(h["revision"], h["version"], h["moved_by"]["via"]) for h in json.loads(out)] == [
        (1, 1, "cli"),
        (2, 2, "cli"),
    ]

    code, out, _ = _run(capsys, backend, "verify", "mnist-mlp:2")
    assert code == 0 and "OK" in out
    backend.path(f"{v2.uri}/model_config.json").write_bytes(b"{}")
    code, out, _ = _run(capsys, backend, "verify", "mnist-mlp@production", "-o", "json")
    report = json.loads(out)
    assert code == 1 and report["verdict"] == "FAILED"
    assert any("model_config.json: size" in p for p in report["problems"])


def test_missing_model_or_alias_is_an_error(capsys, backend, registry, trained_dir):
    registry.register("mnist-mlp", trained_dir("a")[0])
    code, out, err = _run(capsys, backend, "list", "no-such-model")
    assert code == 1 and "no model 'no-such-model'" in err and out == ""
    code, _, err = _run(capsys, backend, "history", "mnist-mlp", "staging")
    assert code == 1 and "has no alias 'staging'" in err
    code, _, err = _run(capsys, backend, "show", "mnist-mlp@staging")
    assert code == 1 and "staging" in err


def test_usage_errors_exit_2(capsys, backend):
    with pytest.raises(SystemExit) as exc:
        main(["models", "list", "--output", "xml"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["models", "promote", "m", "a", "not-a-number"])
    assert exc.value.code == 2


def airflow(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "airflow", "trainium", "models", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=180,
    )


def test_airflow_cli_has_the_model_commands(tmp_path):
    """One process per exit code: ``airflow trainium models`` is registered through provider info."""
    from airflow_provider_trainium.registry.registry import ModelRegistry

    trained = tmp_path / "trained"
    trained.mkdir()
    (trained / "model.safetensors").write_bytes(b"weights")
    (trained / "model_config.json").write_text("{}")
    (trained / "metrics.json").write_text('{"accuracy": 0.97}')
    root = (tmp_path / "registry").as_uri()
    ModelRegistry(root).register("mnist-mlp", trained.as_uri())

    done = airflow("list", "--root", root, "--output", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"name": "mnist-mlp", "versions": 1, "latest": 1, "aliases": {}}]

    done = airflow("history", "mnist-mlp", "production", "--root", root)
    assert done.returncode == 1 and "has no alias 'production'" in done.stderr
    assert "Traceback" not in done.stderr

    done = airflow("list", "--root", root, "--output", "xml")
    assert done.returncode == 2, done.stderr


def test_standalone_stdout_is_only_the_result(backend, registry, trained_dir):
    """The installed command: ``--output json`` on stdout parses even when the S3 connection logs."""
    registry.register("mnist-mlp", trained_dir("a")[0])
    conn = ["--aws-conn-id", backend.conn_id] if backend.conn_id else []
    done = subprocess.run(
        [sys.executable, "-m", "airflow_provider_trainium.cli", "models", "list", "--root", backend.root_uri, *conn]
        + ["--output", "json"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"name": "mnist-mlp", "versions": 1, "latest": 1, "aliases": {}},
    ]
