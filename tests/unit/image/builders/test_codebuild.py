"""The buildspec's build phase is shell: run it with a ``docker`` on PATH that records what it was asked."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from airflow_provider_trainium.image.builders.base import BASE_DIGEST_LABEL, BuildRequest
from airflow_provider_trainium.image.builders.codebuild import buildspec
from airflow_provider_trainium.image.context import StagedContext

BASE = "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.28.0-ubuntu24.04"
DIGEST = "sha256:" + "12" * 32
# Answers `image inspect` the way Docker does after a pull by tag; records every other call, one argv a line.
DOCKER = f"""#!/bin/sh
if [ "$1 $2" = "image inspect" ]; then echo "{BASE.rsplit(":", 1)[0]}@{DIGEST}"; exit 0; fi
if [ "$1" = "inspect" ]; then echo "repo@sha256:{"34" * 32}"; exit 0; fi
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> "$DOCKER_CALLS"
"""


def run_build_phase(tmp_path: Path, base_image: str | None) -> tuple[list[list[str]], str]:
    request = BuildRequest(StagedContext(tmp_path, "docker/Dockerfile", ()), "1.dkr/x:ctx-1", "a" * 64,
                           base_image=base_image)  # fmt: skip
    commands = json.loads(buildspec(request))["phases"]["build"]["commands"]
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "docker").write_text(DOCKER)
    (tmp_path / "bin" / "docker").chmod(0o755)
    script = "set -e\n" + "\n".join(commands) + '\necho "$BASE_DIGEST"\n'
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "DOCKER_CALLS": str(tmp_path / "calls")}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, check=True)
    calls = [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]
    return calls, done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


@pytest.mark.process
def test_the_base_is_pulled_and_its_digest_labels_the_build(tmp_path: Path) -> None:
    calls, exported = run_build_phase(tmp_path, BASE)
    assert calls[0] == ["pull", BASE]
    build = calls[1]
    assert build[0] == "build" and build[-1] == "."
    assert build[build.index("--label") + 1] == f"{BASE_DIGEST_LABEL}={DIGEST}"
    assert calls[2] == ["push", "1.dkr/x:ctx-1"]
    assert exported == DIGEST


@pytest.mark.process
def test_a_pinned_base_uses_its_own_digest_and_scratch_pulls_nothing(tmp_path: Path) -> None:
    pinned = f"{BASE}@sha256:{'56' * 32}"
    (tmp_path / "pinned").mkdir()
    calls, exported = run_build_phase(tmp_path / "pinned", pinned)
    assert calls[0] == ["pull", pinned] and exported == f"sha256:{'56' * 32}"
    assert f"{BASE_DIGEST_LABEL}=sha256:{'56' * 32}" in calls[1]
    (tmp_path / "scratch").mkdir()
    calls, _ = run_build_phase(tmp_path / "scratch", None)
    assert [c[0] for c in calls] == ["build", "push"] and "--label" not in calls[0]
