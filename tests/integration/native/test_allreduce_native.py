"""The all-reduce smoke test on the native stack: 2 ranks through torchrun, plain torch.distributed on gloo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def run(tmp_path: Path, stack: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRAINIUM_STACK": stack, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
               "-m", "trainium_trainer.allreduce", "--bandwidth-mb", "1", "--iterations", "2",
               "--output-uri", str(tmp_path)]  # fmt: skip
    return subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_every_rank_sums_exactly_on_the_native_stack(tmp_path):
    done = run(tmp_path, "native")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    result = json.loads((tmp_path / "allreduce.json").read_text())
    assert result["ok"] is True and result["world_size"] == 2
    assert (result["sum_ones"], result["sum_ranks"]) == (2.0, 3.0)
    assert result["backend"] == "gloo" and result["runtime"] == "native-cpu"
    assert result["bus_bandwidth_gbps"] > 0
    assert "torch_xla" not in done.stderr and "PJRT" not in done.stderr  # no XLA on the native path
