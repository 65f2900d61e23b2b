"""A real ``transformers.Trainer`` run with ``TrainiumCallback`` writes the curves the Trainium view reads.

The script runs as a user's job does: its own process, ``TRAINIUM_OUTPUT_URI`` set by the environment (the
launcher's part), no other change to the script than the callback. A tiny randomly initialised GPT-2 trains six
steps on CPU (``USE_TORCH_XLA=0``: this venv has torch-xla, which the Trainer would otherwise pick). The stream
must hold every logged step with the Trainer's own losses (``log_history``) and be what the provider's reader
(``plugins.stream``, the view's) parses and plots.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_trainium.plugins.stream import build_series, read_stream
from trainium_trainer import boundary, track

ROOT = Path(__file__).resolve().parents[3]
STEPS = 6

SCRIPT = f"""
import json, sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from trainium_trainer.hf_callback import TrainiumCallback

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2))
rows = torch.randint(0, 64, (40, 16), generator=torch.Generator().manual_seed(0))
data = [{{"input_ids": row, "labels": row}} for row in rows]
args = TrainingArguments(
    output_dir="trainer_output", max_steps={STEPS}, logging_steps=1, per_device_train_batch_size=4,
    eval_strategy="steps", eval_steps=3, per_device_eval_batch_size=8, include_num_input_tokens_seen=True,
    learning_rate=1e-3, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
)
trainer = Trainer(model=model, args=args, train_dataset=data[:32], eval_dataset=data[32:],
                  callbacks=[TrainiumCallback()])
trainer.train()
with open(sys.argv[1], "w") as fh:
    json.dump(trainer.state.log_history, fh)
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict], str]:
    """(output folder, the Trainer's log_history, the script's stdout) of one training run."""
    root = tmp_path_factory.mktemp("hf-callback")
    script, history, out = root / "train.py", root / "log_history.json", root / "output"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in (track.RANK_ENV, "WORLD_SIZE", "LOCAL_RANK")}
    env.update({boundary.ENV_OUTPUT_URI: out.as_uri(), "USE_TORCH_XLA": "0", "HF_HUB_OFFLINE": "1",
                "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"})  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(script), str(history)], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out, json.loads(history.read_text()), done.stdout


def test_every_logged_step_is_in_the_stream_with_the_trainers_loss(run: tuple[Path, list[dict], str]) -> None:
    out, history, stdout = run
    logged = [h for h in history if "loss" in h]
    assert [h["step"] for h in logged] == list(range(1, STEPS + 1))
    read = read_stream(out.as_uri(), out.as_uri())  # the provider's reader: what the Trainium view shows
    assert read is not None and read.notes == []
    sources = read.sources
    train = [r for r in sources[boundary.TRAIN_SOURCE] if r["kind"] == boundary.KIND_TRAIN]
    assert [(r["step"], r["loss"]) for r in train] == [(h["step"], h["loss"]) for h in logged]
    assert [r["lr"] for r in train] == [h["learning_rate"] for h in logged]
    assert [r["epoch"] for r in train] == [h["epoch"] for h in logged]
    assert {r["total_steps"] for r in train} == {STEPS}
    # throughput from the second record on: 4 samples and 4 x 16 tokens a step, over the time between logs
    assert train[0]["samples_per_s"] is None and train[0]["tokens_per_s"] is None
    for r in train[1:]:
        assert r["samples_per_s"] > 0 and r["tokens_per_s"] == pytest.approx(16 * r["samples_per_s"], rel=0.01)

    evals = [r for r in sources[boundary.TRAIN_SOURCE] if r["kind"] == boundary.KIND_EVAL]
    assert [(r["step"], r["loss"]) for r in evals] == [(h["step"], h["eval_loss"]) for h in history if "eval_loss" in h]
    assert [r["step"] for r in evals] == [3, 6]

    series = build_series(sources)
    assert series["loss"] == {"x": [h["step"] for h in logged], "y": [h["loss"] for h in logged]}
    assert series["progress"] == {"step": STEPS, "total_steps": STEPS}
    assert series["eval"]["x"] == [3, 6]
    assert f"progress step {STEPS}/{STEPS} (100%) loss {logged[-1]['loss']:.3g}" in stdout
