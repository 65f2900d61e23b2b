"""Tokens/s of the ``tiny`` Llama: this trainer on eager CPU and torch-xla CPU next to transformers' Trainer.

Both do the same work: the same model (preset, seed), the same blocks in the same order, the same AdamW
groups, warmup + cosine schedule, gradient clipping, batch size and step count, on the same machine, one
process each, one after the other in this one run, each on eager CPU and on torch-xla CPU (the Trainer
through its own torch-xla code path). Prints a markdown table with the XLA graphs each run compiled and each
final model's loss on the held-out blocks, scored by the same function; the runs agree when the eval losses
are within ``LOSS_TOLERANCE`` (float32 rounding differs between eager and XLA, nothing else).

    .venv/bin/python benchmarks/llama_tokens.py [--steps 200] [--batch-size 8] [--repeats 3] [--threads 1]

Each runtime runs ``--repeats`` pairs (ours, the Trainer), alternating which of the two runs first; the ratio
column is the median of the pairs' steady ratios, with their range. Every run gets ``OMP_NUM_THREADS=1``
unless ``--threads`` says otherwise: on a shared two-core host a two-thread intra-op pool makes the same run
land at one of two speeds from one process to the next (see ``benchmarks/trainer_overhead.py``).

``overall`` divides all tokens by the whole training loop's time (first-step compilation included);
``steady`` leaves out the first logging window (for XLA: the window that compiles the graphs), for
transformers' Trainer its first ``--log-every`` steps. ``last loss``: this trainer's loss at the last step,
the Trainer's mean over its last logging window.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED, LR, WARMUP, MIN_LR_RATIO, WEIGHT_DECAY, MAX_GRAD_NORM = 0, 3e-3, 5, 0.1, 0.01, 1.0
#: Largest eval-loss difference between any run and the Trainer that still counts as the same training.
LOSS_TOLERANCE = 0.01
RUNTIMES = ("eager", "xla")


def run_ours(runtime: str, data: Path, out: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "TRAINIUM_RUNTIME": runtime, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "trainium_trainer.llama.train", "--data-uri", str(data), "--output-uri", str(out),
               "--max-steps", str(args.steps), "--batch-size", str(args.batch_size), "--log-every", str(args.log_every),
               "--seed", str(SEED), "--lr", str(LR), "--warmup-steps", str(WARMUP), "--min-lr-ratio", str(MIN_LR_RATIO),
               "--weight-decay", str(WEIGHT_DECAY), "--max-grad-norm", str(MAX_GRAD_NORM),
               "--eval-batches", "0"]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    metrics = json.loads((out / "metrics.json").read_text())
    windows = metrics["history"][1:]
    steady = sum(w["tokens_per_s"] for w in windows) / len(windows) if windows else metrics["tokens_per_s"]
    return {
        "runner": f"trainium_trainer.llama ({runtime})",
        "overall": metrics["tokens_per_s"],
        "steady": round(steady, 1),
        "final_loss": metrics["final_loss"],
        "eval_loss": metrics["eval_loss"],
        "graphs": metrics["xla_compilations"] if runtime == "xla" else "-",
        "wall_s": round(wall, 1),
    }


def hf_worker(data: str, steps: int, batch_size: int, log_every: int, out: str, xla: bool) -> None:
    """transformers' Trainer doing this trainer's exact work (runs in its own process).

    Same initial weights (preset and seed), the same blocks in the same order (this trainer's ``DataOrder``
    for one rank, fed sequentially), the same AdamW parameter groups and betas, the same warmup + cosine
    schedule (``lr_lambda``) and gradient clipping. Its final model is then scored by the same evaluation.
    """
    import numpy as np
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    sys.path.insert(0, str(REPO))
    from trainium_trainer.common.device import Runtime
    from trainium_trainer.llama.data import load_blocks, read_index
    from trainium_trainer.llama.model import new_model
    from trainium_trainer.llama.presets import llama_config
    from trainium_trainer.llama.train import DataOrder, evaluate_loss, lr_lambda

    train_blocks = load_blocks(data, "train")
    order = DataOrder(len(train_blocks), batch_size, 0, 1, SEED)
    sequence = np.concatenate([order.batch(step) for step in range(steps)])
    blocks = torch.from_numpy(train_blocks[sequence])
    model = new_model(llama_config("tiny", int(read_index(data)["vocab_size"])), seed=SEED)
    if xla:  # the optimizer must be built around the parameters on the device, as Trainer checks
        import torch_xla

        model = model.to(torch_xla.device())
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "norm" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 or "norm" in n]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
        lr=LR,
        betas=(0.9, 0.95),
        foreach=False,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(WARMUP, steps, MIN_LR_RATIO))

    class Blocks(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(blocks)

        def __getitem__(self, i: int) -> dict:
            return {"input_ids": blocks[i], "labels": blocks[i]}

    training = TrainingArguments(
        output_dir=out,
        max_steps=steps,
        per_device_train_batch_size=batch_size,
        max_grad_norm=MAX_GRAD_NORM,
        logging_steps=log_every,
        save_strategy="no",
        report_to=[],
        use_cpu=not xla,
        dataloader_num_workers=0,
        seed=SEED,
        disable_tqdm=True,
    )

    class StepClock(TrainerCallback):
        """Step end times and logged losses (each the mean over its logging window)."""

        marks: dict[int, float] = {}
        losses: dict[int, float] = {}

        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
            self.marks[state.global_step] = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
            if logs and "loss" in logs:
                self.losses[state.global_step] = logs["loss"]

    clock = StepClock()

    class SequentialTrainer(Trainer):
        """Our data order (sequential blocks). transformers 4.x has no sampling-strategy argument."""

        def _get_train_sampler(self, *args, **kwargs):  # noqa: ANN002, ANN003
            return torch.utils.data.SequentialSampler(self.train_dataset)

    trainer = SequentialTrainer(
        model=model, args=training, train_dataset=Blocks(), callbacks=[clock], optimizers=(optimizer, scheduler)
    )
    result = trainer.train()
    tokens_per_step = batch_size * blocks.shape[1]
    first = min(log_every, steps - 1)
    steady = tokens_per_step * (steps - first) / (clock.marks[steps] - clock.marks[first])
    graphs = "-"
    if xla:
        import torch_xla.debug.metrics as met

        graphs = int(met.metric_data("CompileTime")[0])
    eval_blocks = load_blocks(data, "eval")
    eval_loss = evaluate_loss(model.cpu(), eval_blocks, Runtime("eager", torch.device("cpu")), batch_size)
    Path(out, "result.json").write_text(
        json.dumps(
            {
                "tokens_per_s": steps * tokens_per_step / result.metrics["train_runtime"],
                "steady": steady,
                "final_loss": clock.losses[max(clock.losses)],
                "eval_loss": eval_loss,
                "graphs": graphs,
            }
        )
    )


def run_hf(runtime: str, data: Path, out: Path, args: argparse.Namespace) -> dict:
    # Trainer moves the model to the XLA device when torch-xla is installed and enabled (its TPU code path).
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "USE_TORCH_XLA": "1" if runtime == "xla" else "0",
        "PJRT_DEVICE": "CPU",
    }
    command = [sys.executable, __file__, "--hf-worker", "--data", str(data), "--out", str(out), "--steps",
               str(args.steps), "--batch-size", str(args.batch_size), "--log-every", str(args.log_every)]  # fmt: skip
    if runtime == "xla":
        command.append("--xla")
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    result = json.loads((out / "result.json").read_text())
    return {
        "runner": f"transformers Trainer ({runtime})",
        "overall": round(result["tokens_per_s"], 1),
        "steady": round(result["steady"], 1),
        "final_loss": round(result["final_loss"], 4),
        "eval_loss": round(result["eval_loss"], 6),
        "graphs": result["graphs"],
        "wall_s": round(wall, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    p.add_argument("--repeats", type=int, default=3, help="pairs (ours, the Trainer) per runtime")
    p.add_argument("--hf-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--xla", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.hf_worker:
        hf_worker(args.data, args.steps, args.batch_size, args.log_every, args.out, args.xla)
        return

    sys.path.insert(0, str(REPO))
    from benchmarks.pairs import alternating_pairs, ratio_summary
    from trainium_trainer.llama.data import prepare

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        index = prepare(
            str(root / "data"),
            synthetic_date="2026-01-01",
            synthetic_records=800,
            tokenizer_uri=str(root / "tokenizer.json"),
            train_new_tokenizer=True,
        )
        run_number = itertools.count()  # a fresh output folder for every run
        pairs = {
            runtime: alternating_pairs(
                lambda: run_ours(runtime, root / "data", root / f"ours-{runtime}-{next(run_number)}", args),  # noqa: B023
                lambda: run_hf(runtime, root / "data", root / f"hf-{runtime}-{next(run_number)}", args),  # noqa: B023
                args.repeats,
            )
            for runtime in RUNTIMES
        }
    print(
        f"tiny Llama, {len(index['train'])} shard(s), seq {index['block_size']}, batch {args.batch_size}, "
        f"{args.steps} steps, 1 process each, {args.repeats} alternating pair(s) per runtime (median shown), "
        f"{os.cpu_count()} CPU(s), "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'default')}\n"
    )
    print("| runner | tokens/s overall | tokens/s steady | vs Trainer, same runtime (steady) | pair range | last loss "
          "| eval loss | eval loss - Trainer (eager) | XLA graphs compiled | wall s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    agree = True
    reference = pairs["eager"][0][1]["eval_loss"]
    for side in (0, 1):
        for runtime in RUNTIMES:
            runs = [pair[side] for pair in pairs[runtime]]
            ratios = [ours["steady"] / hf["steady"] for ours, hf in pairs[runtime]]
            ratio, spread = ratio_summary(ratios) if side == 0 else (1.0, "-")
            r = runs[-1]
            overall = statistics.median(x["overall"] for x in runs)
            steady = statistics.median(x["steady"] for x in runs)
            wall = round(statistics.median(x["wall_s"] for x in runs), 1)
            for x in runs:
                agree = agree and abs(x["eval_loss"] - reference) <= LOSS_TOLERANCE
            delta = r["eval_loss"] - reference
            print(f"| {r['runner']} | {overall:.1f} | {steady:.1f} | {ratio:.2f}x | {spread} | {r['final_loss']} | "
                  f"{r['eval_loss']:.4f} | {delta:+.5f} | {r['graphs']} | {wall} |")  # fmt: skip
    verdict = "agree" if agree else "DIFFER"
    print(f"\nsame training: eval losses {verdict} within {LOSS_TOLERANCE} of the Trainer's")


if __name__ == "__main__":
    main()
