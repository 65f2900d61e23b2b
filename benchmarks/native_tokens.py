"""Tokens/s of our native Llama trainer (``trainium_trainer.llama.native_train``: FSDP2 + DTensor) next to TorchTitan's
own trainer (``trainium_trainer.titan.train``) on the same model, data, steps and seed: CPU, 2 ranks on gloo.

Both start from the same weights (the native trainer's seeded initialization, written once as a Hugging Face
directory: ``--base-model-uri`` for ours, TorchTitan's ``initial_load_in_hf`` for it), read the same blocks in
the same order (``DataOrder``), and run AdamW (betas 0.9/0.95) at a constant learning rate, clipping at 1.0 and
no weight decay (the two group parameters differently). The two models are different code (TorchTitan's
Llama 3 vs transformers' Llama, complex vs rotate-half RoPE), so the final losses agree within
``LOSS_TOLERANCE``, not bit for bit. Run in the native venv:

    make bench-native            # .venv-native/bin/python benchmarks/native_tokens.py [--steps 30] [--repeats 3]

``--repeats`` pairs alternate which trainer runs first (``benchmarks.pairs``); the ratio is the median of the
pairs' TorchTitan/ours tokens/s with its range. tokens/s is each trainer's own: training steps' tokens over
the training loop's time (no start-up, no export). Exits 1 when a trainer fails (TorchTitan's error printed)
or the final losses differ by more than the tolerance.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.pairs import alternating_pairs, ratio_summary  # noqa: E402

#: A constant learning rate (no warmup, no decay: ``min_lr_ratio`` 1), the one schedule both trainers define
#: identically; their warmup and cosine formulas differ by a step, which alone moved the final loss by 0.05.
SEED, LR, WARMUP, MIN_LR_RATIO, MAX_GRAD_NORM = 0, 3e-3, 0, 1.0, 1.0
#: Largest final-loss difference (absolute, nats) that still counts as the same training: same weights, batches,
#: optimizer and schedule in fp32, so only the attention kernels' summation order differs (set before measuring).
LOSS_TOLERANCE = 0.01
#: Steps left out of the speed: the first ones carry one-time work (FSDP's lazy init, allocator growth) that
#: differs between the trainers and says nothing about a long run.
WARM_STEPS = 5


def prepare(root: Path, preset: str) -> tuple[Path, Path]:
    """The data job's blocks and the seeded initial model both trainers start from."""
    import json

    from trainium_trainer.llama.data import prepare as prepare_data
    from trainium_trainer.llama.hf_export import save_model, write_tokenizer
    from trainium_trainer.llama.model import base_model, build_config

    data, init = root / "data", root / "init"
    prepare_data(str(data), synthetic_date="2026-01-01", tokenizer_uri=str(root / "tokenizer.json"),
                 train_new_tokenizer=True)  # fmt: skip
    vocab = json.loads((data / "index.json").read_text())["vocab_size"]
    config = build_config(preset, int(vocab), None)
    model = base_model(config, SEED, None)
    save_model({k: v.detach().contiguous() for k, v in model.state_dict().items()}, config, str(init))
    write_tokenizer(str(init), str(data), None, config.max_position_embeddings)
    return data, init


def torchrun(module: str, out: Path, extra: list[str], args: argparse.Namespace, data: Path, init: Path) -> dict:
    import json

    env = {**os.environ, "TRAINIUM_STACK": "native", "OMP_NUM_THREADS": str(args.threads), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", module,
               "--data-uri", str(data), "--output-uri", str(out), "--base-model-uri", str(init),
               "--max-steps", str(args.steps), "--batch-size", str(args.batch_size), "--log-every", "1",
               "--seed", str(SEED), "--lr", str(LR), "--warmup-steps", str(WARMUP), "--min-lr-ratio",
               str(MIN_LR_RATIO), "--weight-decay", "0", "--max-grad-norm", str(MAX_GRAD_NORM), *extra]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        print(f"{module} failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}", file=sys.stderr)
        raise SystemExit(1)
    metrics = json.loads((out / "metrics.json").read_text())
    train = [r for r in metrics["history"] if r["kind"] == "train"]
    steady = [r["tokens_per_s"] for r in train[WARM_STEPS:] if r.get("tokens_per_s")]
    return {"tokens_per_s": statistics.median(steady), "loop_tokens_per_s": metrics["tokens_per_s"],
            "first_loss": train[0]["loss"],
            "final_loss": metrics["final_loss"], "eval_loss": metrics["eval_loss"],
            "wall_s": time.perf_counter() - started}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    try:
        import torchtitan  # noqa: F401
    except ImportError as err:
        print(f"TorchTitan is not installed here ({err}); run with .venv-native/bin/python (make bench-native)",
              file=sys.stderr)  # fmt: skip
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-native-") as tmp:
        root = Path(tmp)
        data, init = prepare(root, args.preset)
        runs = iter(range(10**6))

        def ours() -> dict:
            return torchrun("trainium_trainer.llama.train", root / f"ours-{next(runs)}", ["--preset", args.preset],
                            args, data, init)  # fmt: skip

        def titan() -> dict:
            extra = ["--flavor", args.preset]
            return torchrun("trainium_trainer.titan.train", root / f"titan-{next(runs)}", extra, args, data, init)

        pairs = alternating_pairs(ours, titan, args.repeats)
    ratio, spread = ratio_summary([o["tokens_per_s"] / t["tokens_per_s"] for o, t in pairs])
    print(f"\n{args.preset}, {args.steps} steps, batch {args.batch_size}/rank, 2 ranks gloo (dp=2), CPU, "
          f"OMP_NUM_THREADS={args.threads}, {args.repeats} alternating pairs\n")  # fmt: skip
    print("| trainer | steady tokens/s (median of runs) | range | whole loop tokens/s | step-1 loss | final loss "
          "| eval loss |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for name, side in (("trainium_trainer.llama native (FSDP2)", 0), ("TorchTitan 0.2.2 Trainer", 1)):
        speeds = [pair[side]["tokens_per_s"] for pair in pairs]
        loop = statistics.median(pair[side]["loop_tokens_per_s"] for pair in pairs)
        last = pairs[-1][side]
        print(f"| {name} | {statistics.median(speeds):.0f} | {min(speeds):.0f}-{max(speeds):.0f} | {loop:.0f} | "
              f"{last['first_loss']:.4f} | {last['final_loss']:.4f} | {last['eval_loss']:.4f} |")  # fmt: skip
    print(f"\nours / TorchTitan steady tokens/s: {ratio:.2f}x (pairs {spread}; goal >= 1.0x)")
    gap = max(abs(o["final_loss"] - t["final_loss"]) for o, t in pairs)
    verdict = "agree" if gap <= LOSS_TOLERANCE else "DIFFER"
    print(f"final losses {verdict}: largest difference {gap:.4f} (tolerance {LOSS_TOLERANCE})")
    return 0 if gap <= LOSS_TOLERANCE else 1


if __name__ == "__main__":
    raise SystemExit(main())
