"""TorchTitan's own trainer through ``trainium_trainer.titan.train`` on 2 ranks on gloo (torchrun, as the launcher runs
it): the debug model on the data job's local corpus, our stream and metrics, its DCP checkpoint out as a
Hugging Face directory that ``from_pretrained`` loads and that computes the run's eval loss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torchtitan")  # the native venv's; the main venv never collects this folder

import torch  # noqa: E402

from trainium_trainer.llama.data import prepare  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
STEPS = 6


@pytest.fixture(scope="module")
def data_uri(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("titan-data")
    prepare(str(root / "data"), synthetic_date="2026-01-01", tokenizer_uri=str(root / "tokenizer.json"),
            train_new_tokenizer=True)  # fmt: skip
    return str(root / "data")


def torchrun(ranks: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRAINIUM_STACK": "native", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "trainium_trainer.launch", "--nodes=1", f"--nproc-per-node={ranks}",
               "--module=trainium_trainer.titan.train",
               "--", *args]  # fmt: skip
    env |= {"TRAINIUM_NUM_NODES": "1", "TRAINIUM_NODE_RANK": "0", "TRAINIUM_MAIN_ADDR": "127.0.0.1",
            "TRAINIUM_MAIN_PORT": str(_free_port())}  # fmt: skip
    return subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)


def _free_port() -> int:
    from tests.conftest import free_port

    return free_port()


def test_torchtitan_trains_the_debug_model_on_two_gloo_ranks_and_exports_hugging_face(tmp_path, data_uri):
    from transformers import AutoModelForCausalLM

    out = tmp_path / "out"
    done = torchrun(2, "--data-uri", data_uri, "--output-uri", str(out), "--flavor", "debugmodel", "--max-steps",
                    str(STEPS), "--batch-size", "4", "--log-every", "1", "--warmup-steps", "2")  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    summary = json.loads((out / "metrics.json").read_text())
    assert summary["trainer"] == "torchtitan" and summary["torchtitan_version"] == "0.2.2"
    assert (summary["world_size"], summary["data_parallel_size"], summary["process_group_backend"]) == (2, 2, "gloo")
    assert summary["steps"] == STEPS and summary["tokens_per_s"] > 0
    train = [r for r in summary["history"] if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(1, STEPS + 1)) and train[-1]["loss"] < train[0]["loss"]
    assert train[-1]["loss"] == pytest.approx(summary["final_loss"], abs=1e-6)
    # TorchTitan's own log printed the same losses our stream holds
    assert f"step:  {STEPS}  loss:  {train[-1]['loss']:.5f}" in done.stdout + done.stderr

    # TorchTitan's checkpoint: DCP shards of both ranks; the job config it ran is ours
    ckpt = out / "titan" / "checkpoint" / f"step-{STEPS}"
    assert {".metadata", "__0_0.distcp", "__1_0.distcp"} <= {p.name for p in ckpt.iterdir()}
    assert 'flavor = "debugmodel"' in (out / "titan" / "job_config.toml").read_text()

    model = AutoModelForCausalLM.from_pretrained(out).eval()
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 256
    blocks = torch.from_numpy(np.concatenate([np.load(p) for p in sorted((Path(data_uri) / "eval").glob("*.npy"))]))
    with torch.no_grad():
        logits = model(input_ids=blocks.long()).logits.float()
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 blocks[:, 1:].reshape(-1).long())  # fmt: skip
    assert float(loss) == pytest.approx(summary["eval_loss"], abs=1e-4)
    assert float(loss) < train[0]["loss"]  # the exported weights are the trained ones, not the initial ones
    assert (out / "_SUCCESS").exists() and (out / "tokenizer.json").exists()


def test_an_s3_checkpoint_folder_is_refused_as_bad_input(tmp_path, data_uri):
    done = torchrun(1, "--data-uri", data_uri, "--output-uri", str(tmp_path / "o"), "--max-steps", "1",
                    "--checkpoint-uri", "s3://bucket/ckpt")  # fmt: skip
    assert done.returncode != 0 and "exitcode: 65" in done.stderr, (done.stdout + done.stderr)[-2000:]
    assert "BAD INPUT: --checkpoint-uri 's3://bucket/ckpt'" in done.stderr and "local folders only" in done.stderr
