"""Tokens/s of the ``tiny`` Llama: this trainer on eager CPU and torch-xla CPU next to transformers' Trainer.

Same model (preset, seed), same packed data, same batch size, optimizer and step count, same machine, one
process each, one after the other in this one run. Prints a markdown table with the XLA graphs each run
compiled.

    .venv/bin/python benchmarks/llama_tokens.py [--steps 200] [--batch-size 8] [--threads 2]

``overall`` divides all tokens by the whole training loop's time (first-step compilation included);
``steady`` leaves out the first logging window (for XLA: the window that compiles the graphs), and for
transformers' Trainer the first 10 steps. Trainer reports the mean loss over the run, not the last one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_ours(runtime: str, data: Path, out: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "TRAINIUM_RUNTIME": runtime, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(REPO)}
    command = [
        sys.executable,
        "-m",
        "trainer.llama.train",
        "--data-uri",
        str(data),
        "--output-uri",
        str(out),
        "--max-steps",
        str(args.steps),
        "--batch-size",
        str(args.batch_size),
        "--log-every",
        str(args.log_every),
        "--lr",
        "3e-3",
        "--warmup-steps",
        "5",
        "--eval-batches",
        "1",
    ]
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    metrics = json.loads((out / "metrics.json").read_text())
    windows = metrics["history"][1:]
    steady = sum(w["tokens_per_s"] for w in windows) / len(windows) if windows else metrics["tokens_per_s"]
    return {
        "runner": f"trainer.llama ({runtime})",
        "overall": metrics["tokens_per_s"],
        "steady": round(steady, 1),
        "final_loss": metrics["final_loss"],
        "graphs": metrics["xla_compilations"] if runtime == "xla" else "-",
        "wall_s": round(wall, 1),
    }


def hf_worker(data: str, steps: int, batch_size: int, out: str) -> None:
    """transformers' Trainer on the same blocks and model: runs in its own process."""
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    sys.path.insert(0, str(REPO))
    from trainer.llama.data import load_blocks, read_index
    from trainer.llama.model import new_model
    from trainer.llama.presets import llama_config

    blocks = torch.from_numpy(load_blocks(data, "train"))
    model = new_model(llama_config("tiny", int(read_index(data)["vocab_size"])), seed=0)

    class Blocks(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(blocks)

        def __getitem__(self, i: int) -> dict:
            return {"input_ids": blocks[i], "labels": blocks[i]}

    training = TrainingArguments(
        output_dir=out,
        max_steps=steps,
        per_device_train_batch_size=batch_size,
        learning_rate=3e-3,
        warmup_steps=5,
        lr_scheduler_type="cosine",
        weight_decay=0.01,
        adam_beta2=0.95,
        max_grad_norm=1.0,
        logging_steps=10,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        seed=0,
        disable_tqdm=True,
    )

    class StepClock(TrainerCallback):
        """Times the steps after the first logging window, like ``steady`` for this trainer."""

        marks: dict[int, float] = {}

        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
            self.marks[state.global_step] = time.perf_counter()

    clock = StepClock()
    result = Trainer(model=model, args=training, train_dataset=Blocks(), callbacks=[clock]).train()
    tokens_per_step = batch_size * blocks.shape[1]
    first = min(10, steps - 1)
    steady = tokens_per_step * (steps - first) / (clock.marks[steps] - clock.marks[first])
    Path(out, "result.json").write_text(
        json.dumps(
            {
                "tokens_per_s": steps * tokens_per_step / result.metrics["train_runtime"],
                "steady": steady,
                "final_loss": result.training_loss,
            }
        )
    )


def run_hf(data: Path, out: Path, args: argparse.Namespace) -> dict:
    # Trainer would move the model to XLA when torch-xla is installed; the baseline is eager CPU.
    env = {**os.environ, "PYTHONPATH": str(REPO), "USE_TORCH_XLA": "0"}
    command = [
        sys.executable,
        __file__,
        "--hf-worker",
        "--data",
        str(data),
        "--out",
        str(out),
        "--steps",
        str(args.steps),
        "--batch-size",
        str(args.batch_size),
    ]
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    result = json.loads((out / "result.json").read_text())
    return {
        "runner": "transformers Trainer (eager)",
        "overall": round(result["tokens_per_s"], 1),
        "steady": round(result["steady"], 1),
        "final_loss": round(result["final_loss"], 4),  # mean over the run, as Trainer reports it
        "graphs": "-",
        "wall_s": round(wall, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    p.add_argument("--hf-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.hf_worker:
        hf_worker(args.data, args.steps, args.batch_size, args.out)
        return

    sys.path.insert(0, str(REPO))
    from trainer.llama.data import prepare

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        index = prepare(
            str(root / "data"),
            synthetic_date="2026-01-01",
            synthetic_records=800,
            tokenizer_uri=str(root / "tokenizer.json"),
            train_new_tokenizer=True,
        )
        rows = [
            run_ours("eager", root / "data", root / "eager", args),
            run_ours("xla", root / "data", root / "xla", args),
            run_hf(root / "data", root / "hf", args),
        ]
    print(
        f"tiny Llama, {len(index['train'])} shard(s), seq {index['block_size']}, batch {args.batch_size}, "
        f"{args.steps} steps, 1 process each, {os.cpu_count()} CPU(s)\n"
    )
    print("| runner | tokens/s overall | tokens/s steady | final loss | XLA graphs compiled | wall s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['runner']} | {r['overall']} | {r['steady']} | {r['final_loss']} | {r['graphs']} | {r['wall_s']} |")


if __name__ == "__main__":
    main()
