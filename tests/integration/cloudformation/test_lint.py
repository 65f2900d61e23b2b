"""AWS's linter and checkov over every template: zero findings, and every suppression says why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.cloudformation.conftest import TEMPLATE_DIR, TEMPLATES, template_path

REPO = TEMPLATE_DIR.parent
# checkov pins termcolor<2.4 and cachetools<6, which Airflow 3.3 cannot share: it lives in its own venv,
# built from its own lock with the uv that `make venv` installs (cached after the first run).
CHECKOV_LOCK = TEMPLATE_DIR / "checkov.lock"
CHECKOV_VENV = REPO / ".venv" / "checkov"


def _uv() -> str:
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    if not found:
        pytest.fail("uv is needed to build the checkov environment; run `make venv`")
    return found


@pytest.fixture(scope="module")
def checkov() -> Path:
    exe = CHECKOV_VENV / "bin" / "checkov"
    stamp = CHECKOV_VENV / ".lock"
    lock = CHECKOV_LOCK.read_text()
    if not exe.exists() or not stamp.exists() or stamp.read_text() != lock:
        uv = _uv()
        subprocess.run([uv, "venv", "-q", "--allow-existing", "-p", sys.executable, str(CHECKOV_VENV)], check=True)
        subprocess.run(
            [uv, "pip", "install", "-q", "-p", str(CHECKOV_VENV / "bin" / "python"), "-r", str(CHECKOV_LOCK)],
            check=True,
        )
        stamp.write_text(lock)
    return exe


def test_cfn_lint_finds_nothing_in_any_template() -> None:
    paths = [str(template_path(name)) for name in TEMPLATES]
    done = subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), "--format", "parseable", *paths],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == ""


def test_checkov_passes_every_template_and_each_skip_has_a_reason(checkov: Path) -> None:
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    done = subprocess.run(
        [
            str(checkov),
            "--directory",
            str(TEMPLATE_DIR),
            "--framework",
            "cloudformation",
            "--skip-download",
            "--output",
            "json",
            "--compact",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    report = json.loads(done.stdout)
    assert done.returncode == 0, json.dumps(report["results"]["failed_checks"], indent=1)[:4000]
    summary = report["summary"]
    assert summary["failed"] == 0 and summary["parsing_errors"] == 0, summary
    results = report["results"]
    scanned = {Path(c["file_path"]).name for c in results["passed_checks"]}
    assert scanned == {f"{name}.yaml" for name in TEMPLATES}
    for skipped in results["skipped_checks"]:
        reason = (skipped.get("check_result") or {}).get("suppress_comment") or ""
        assert len(reason.split()) >= 4, f"{skipped['check_id']} on {skipped['resource']} is skipped without a reason"
