"""The Llama trainer on the native stack (``TRAINIUM_STACK=native``): 2 ranks on gloo through torchrun.

FSDP2 over data parallel resumes exactly from its DCP shards; DTensor tensor parallel computes what one
process does; the Hugging Face output loads with ``from_pretrained`` and computes the run's eval loss.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[3]
STEPS = 8
COMMON = ("--max-steps", str(STEPS), "--log-every", "1", "--batch-size", "4", "--warmup-steps", "2")


def torchrun(ranks: int, *args: str, env: dict[str, str] | None = None) -> None:
    """``python -m torch.distributed.run`` on this host, as the launcher runs it in a container."""
    env = {**os.environ, "TRAINIUM_STACK": "native", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), **(env or {})}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
               "-m", "trainium_trainer.llama.train", *args]  # fmt: skip
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]


def metrics(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


@pytest.mark.slow
def test_resumed_run_equals_uninterrupted_run(tmp_path, llama_data_uri):
    full, split = tmp_path / "full", tmp_path / "split"
    torchrun(2, "--data-uri", llama_data_uri, *COMMON, "--output-uri", str(full), "--checkpoint-uri",
             str(tmp_path / "ckpt-full"), "--checkpoint-every", "4")  # fmt: skip
    split_args = ("--data-uri", llama_data_uri, *COMMON, "--output-uri", str(split), "--checkpoint-uri",
                  str(tmp_path / "ckpt-split"), "--checkpoint-every", "4")  # fmt: skip
    torchrun(2, *split_args, "--stop-at-step", "4")
    assert not (split / "_SUCCESS").exists()
    first_leg = [json.loads(line) for chunk in sorted((split / "stream" / "train").glob("*.jsonl"))
                 for line in chunk.read_text().splitlines()]  # fmt: skip
    torchrun(2, *split_args)

    uninterrupted, resumed = metrics(full), metrics(split)
    assert uninterrupted["stack"] == "native" and uninterrupted["process_group_backend"] == "gloo"
    assert uninterrupted["data_parallel_size"] == 2 and uninterrupted["steps"] == STEPS
    # the seeded initialization is written once per node and sharded: rank 0 read half of it, not a full copy
    assert uninterrupted["base_read_fraction"] == pytest.approx(0.5, abs=0.01)
    assert resumed["resumed_from_step"] == 4 and resumed["steps"] == STEPS
    # Same shards, same optimizer state, same batches, same reduction order on 2 gloo ranks: the same floats.
    losses = [r["loss"] for r in uninterrupted["history"]]
    split_losses = [r["loss"] for r in first_leg if r["kind"] == "train"] + [r["loss"] for r in resumed["history"]]
    print(f"resume check: uninterrupted {losses}\n              stopped+resumed {split_losses}")
    assert [r["step"] for r in uninterrupted["history"]] == list(range(1, STEPS + 1))
    assert split_losses == losses
    assert losses[-1] < losses[0]
    a, b = load_file(full / "model.safetensors"), load_file(split / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # the checkpoints are DCP shards: one file per rank and the metadata, the last two kept
    ckpt = tmp_path / "ckpt-split"
    assert sorted(p.name for p in ckpt.iterdir()) == ["latest.json", "step-00000004", "step-00000008"]
    assert sorted(p.name for p in (ckpt / "step-00000008").iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert json.loads((ckpt / "latest.json").read_text()) == {"step": 8, "dir": "step-00000008"}


def test_tensor_parallel_computes_what_one_process_does(tmp_path, llama_data_uri):
    one, tp = tmp_path / "one", tmp_path / "tp"
    args = ("--data-uri", llama_data_uri, *COMMON, "--max-steps", "4")
    torchrun(1, *args, "--output-uri", str(one))
    torchrun(2, *args, "--output-uri", str(tp), "--tensor-parallel-size", "2")
    single, parallel = metrics(one), metrics(tp)
    assert parallel["tensor_parallel_size"] == 2 and parallel["data_parallel_size"] == 1
    # Same weights and batches; the row-wise projections sum two partial products, so the results differ
    # from one process only in float32 summation order (~1e-7 relative), well inside 1e-5 after 4 steps.
    for a, b in zip(single["history"], parallel["history"], strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
    weights_one, weights_tp = load_file(one / "model.safetensors"), load_file(tp / "model.safetensors")
    assert weights_one.keys() == weights_tp.keys()
    for name, tensor in weights_one.items():
        assert weights_tp[name].shape == tensor.shape  # the export gathered whole tensors
        torch.testing.assert_close(weights_tp[name], tensor, rtol=1e-4, atol=1e-5)


def test_hugging_face_out_loads_and_fine_tunes_back_in(tmp_path, llama_data_uri):
    """The output loads with ``from_pretrained`` and computes the run's eval loss; a fine-tune from it starts
    from those weights (its first loss is the exported model's on that step's batches)."""
    from transformers import AutoModelForCausalLM

    from trainium_trainer.llama.train import DataOrder

    out, tuned = tmp_path / "out", tmp_path / "tuned"
    torchrun(2, "--data-uri", llama_data_uri, *COMMON, "--output-uri", str(out), env={"TRAINIUM_PEAK_FLOPS": "1e12"})
    summary = metrics(out)
    assert summary["peak_flops"] == 2e12 and all(r["mfu"] is not None for r in summary["history"][1:])
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    data = Path(llama_data_uri)
    eval_blocks = torch.from_numpy(np.concatenate([np.load(p) for p in sorted((data / "eval").glob("*.npy"))]))
    with torch.no_grad():
        logits = model(input_ids=eval_blocks).logits.float()
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 eval_blocks[:, 1:].reshape(-1))  # fmt: skip
    assert float(loss) == pytest.approx(summary["eval_loss"], abs=1e-4)
    assert (out / "_SUCCESS").exists() and (out / "tokenizer.json").exists()

    torchrun(2, "--data-uri", llama_data_uri, *COMMON, "--max-steps", "1", "--output-uri", str(tuned),
             "--base-model-uri", str(out))  # fmt: skip
    train = torch.from_numpy(np.concatenate([np.load(p) for p in sorted((data / "train").glob("*.npy"))]))
    with torch.no_grad():
        first = [float(model(input_ids=train[order], labels=train[order]).loss)
                 for order in (DataOrder(len(train), 4, rank, 2, 0).batch(0) for rank in (0, 1))]  # fmt: skip
    assert metrics(tuned)["history"][0]["loss"] == pytest.approx(sum(first) / 2, abs=1e-5)


def test_the_compile_trial_runs_the_real_steps_and_keeps_only_its_summary(tmp_path, llama_data_uri):
    out, ckpt = tmp_path / "compile", tmp_path / "ckpt"
    torchrun(2, "--data-uri", llama_data_uri, "--compile-only", "--max-steps", "2", "--batch-size", "4",
             "--output-uri", str(out), "--checkpoint-uri", str(ckpt), "--checkpoint-every", "1")  # fmt: skip
    summary = metrics(out)
    assert summary["compile_only"] is True and summary["stack"] == "native" and summary["steps"] == 2
    assert (out / "_SUCCESS").exists() and not (out / "model.safetensors").exists()
    assert not ckpt.exists() and not (out / "stream").exists()  # no checkpoint, no live curve of a trial
