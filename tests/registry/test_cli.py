"""``airflow-trainium models``: list, show, promote, verify, history on a local root and on moto S3."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from airflow_provider_trainium.cli import main

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\S+ \[\w+\s*\]")


def _run(capsys, backend, *args):
    """In-process run. Airflow's logging is already set up by the test session and prints on stdout,
    so its lines are dropped here; ``test_cli_stdout_is_only_the_result`` checks the real command."""
    conn = ["--aws-conn-id", backend.conn_id] if backend.conn_id else []
    code = main(["models", "--root", backend.root_uri, *conn, *args])
    out = capsys.readouterr()
    stdout = "".join(line for line in out.out.splitlines(keepends=True) if not LOG_LINE.match(line))
    return code, stdout, out.err


def test_cli_list_show_promote_verify(capsys, backend, registry, trained_dir):
    registry.register("mnist-mlp", trained_dir("a")[0], lineage={"dag_id": "d", "run_id": "r1"})
    v2 = registry.register("mnist-mlp", trained_dir("b")[0]).version

    code, out, _ = _run(capsys, backend, "list")
    assert code == 0 and out.split("\n")[1].split() == ["mnist-mlp", "2", "2"]

    assert _run(capsys, backend, "promote", "mnist-mlp", "production", "1")[0] == 0
    code, out, _ = _run(capsys, backend, "--json", "list", "mnist-mlp")
    rows = json.loads(out)
    assert [(r["version"], r["aliases"], r["dag_id"]) for r in rows] == [
        (1, ["production"], "d"),
        (2, [], None),
    ]

    code, out, _ = _run(capsys, backend, "show", "mnist-mlp@production")
    shown = json.loads(out)
    assert shown["version"] == 1 and shown["source"]["run_id"] == "r1"

    code, out, err = _run(capsys, backend, "promote", "mnist-mlp", "production", "9")
    assert code == 2 and "no version 9" in err
    code, out, err = _run(capsys, backend, "promote", "mnist-mlp", "Bad Alias", "1")
    assert code == 2 and "invalid alias" in err

    assert _run(capsys, backend, "promote", "mnist-mlp", "production", "2")[0] == 0
    code, out, _ = _run(capsys, backend, "--json", "history", "mnist-mlp", "production")
    assert [(h["revision"], h["version"], h["moved_by"]["via"]) for h in json.loads(out)] == [
        (1, 1, "cli"),
        (2, 2, "cli"),
    ]

    code, out, _ = _run(capsys, backend, "verify", "mnist-mlp:2")
    assert code == 0 and "OK" in out
    backend.path(f"{v2.uri}/model_config.json").write_bytes(b"{}")
    code, out, _ = _run(capsys, backend, "verify", "mnist-mlp@production")
    assert code == 1 and "FAILED" in out and "model_config.json: size" in out


def test_cli_stdout_is_only_the_result(backend, registry, trained_dir):
    """The installed command: ``--json`` output on stdout parses even when the S3 connection logs."""
    registry.register("mnist-mlp", trained_dir("a")[0])
    conn = ["--aws-conn-id", backend.conn_id] if backend.conn_id else []
    done = subprocess.run(
        [sys.executable, "-m", "airflow_provider_trainium.cli", "models", "--root", backend.root_uri, *conn]
        + ["--json", "list"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"name": "mnist-mlp", "versions": 1, "latest": 1, "aliases": {}},
    ]
