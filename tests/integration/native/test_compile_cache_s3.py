"""The native compile cache on S3 (the moto server), as on ECS/Batch: a node mirrors it locally, pulls it before
the first compilation and pushes what it compiled at the end, so a run on a fresh node starts warm.

The MNIST trainer with ``--compile`` on 2 gloo ranks; inductor's cache stands in for TorchNeuron's NEFF cache.
Each run gets its own ``TMPDIR``, so its mirror starts empty like a new instance's disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.native.test_dcp_s3 import s3  # noqa: F401  (the fixture)
from trainium_trainer.mnist_mlp.prepare import prepare

REPO = Path(__file__).resolve().parents[3]
CACHE = "s3://runs/compile-cache/mnist"


def run(tmp_path: Path, name: str, data: str, *extra: str) -> dict:
    tmpdir = tmp_path / f"{name}-tmp"
    tmpdir.mkdir()
    out = tmp_path / name
    env = {**os.environ, "TRAINIUM_STACK": "native", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO),
           "TMPDIR": str(tmpdir)}  # fmt: skip
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
               "-m", "trainium_trainer.mnist_mlp.train", "--data-uri", data, "--batch-size", "32", "--compile",
               "--compile-cache-uri", CACHE, "--output-uri", str(out), *extra]  # fmt: skip
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return json.loads((out / "metrics.json").read_text())


@pytest.mark.slow
def test_a_fresh_node_pulls_what_the_trial_compiled_and_misses_nothing(tmp_path, s3):  # noqa: F811
    data = (tmp_path / "digits").as_uri()
    prepare(data, seed=0)

    trial = run(tmp_path, "trial", data, "--compile-only", "--max-steps", "4")
    assert trial["compile_cache_persistent"] is True and trial["compile_cache_dir"] == f"{CACHE}/native/inductor"
    assert trial["compile_cache_files_at_start"] == 0 and trial["compile_cache"]["miss"] > 0
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="runs", Prefix="compile-cache/mnist/")["Contents"]]
    assert keys and all(k.startswith("compile-cache/mnist/native/inductor/") for k in keys)
    assert not [k for k in keys if k.endswith(".lock")]

    warm = run(tmp_path, "train", data, "--epochs", "1", "--max-steps", "4")
    assert warm["compile_cache_files_at_start"] == len(keys)
    assert warm["compile_cache"] == {"hit": trial["compile_cache"]["miss"], "miss": 0}
    after = [o["Key"] for o in s3.list_objects_v2(Bucket="runs", Prefix="compile-cache/mnist/")["Contents"]]
    assert sorted(after) == sorted(keys)  # nothing new compiled, nothing pushed twice
