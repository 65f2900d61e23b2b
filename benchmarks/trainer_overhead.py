"""MNIST MLP: ``trainium_trainer.mnist_mlp.train`` against a recipe-style bare loop, eager and torch-xla CPU, 1 and
2 ranks.

Both run on the same generated MNIST-shaped data (60,000 x 28x28 by default), the same 784-120-84-10 MLP,
plain SGD (lr 0.01, no momentum), batch 32 per rank, two epochs, each under ``torchrun`` with the same
environment, in pairs, ``--repeats`` pairs per row, which of the two runs first alternating from pair to pair.
The table shows the median samples/s of each, the median of the pairs' ratios (ours / bare) with their range,
and the XLA graphs each training loop compiled.

Every run gets ``OMP_NUM_THREADS=1`` unless ``--threads`` says otherwise (torchrun sets it so for two ranks
anyway). On a shared two-core host a two-thread intra-op pool makes the same loop run at one of two speeds
(about 36k or 60k samples/s eager, from one run to the next), which drowns the difference being measured.
On torch-xla CPU the trainer moves batches synchronously in chunks (``trainium_trainer.common.feed``);
``--compare-feeds`` also runs it with torch-xla's background ``ParallelLoader`` (the Neuron default)
and adds that column, the measurement behind the choice.

The bare loop is what the ECS + Trn1 recipe writes: contiguous slices of the (unshuffled) data, moved to the
device every step, ``optimizer.step()`` and ``xm.mark_step()`` every step. With 2 ranks it averages gradients
after the backward pass with one ``all_reduce`` per gradient over gloo (on torch-xla CPU through the host,
as the trainer must: PJRT's CPU client has no cross-process collectives).

    python benchmarks/trainer_overhead.py [--samples 60000] [--epochs 2] [--repeats 5] [--threads 1] [--compare-feeds]
        [--runtimes eager,xla] [--ranks 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BATCH = 32
LR = 0.01


def write_data(root: Path, samples: int, seed: int = 0) -> str:
    """MNIST-shaped IDX files: random 28x28 images whose labels follow a fixed linear rule (learnable)."""
    import numpy as np

    from trainium_trainer.mnist_mlp.idx import write_idx

    rng = np.random.default_rng(seed)
    weights = rng.standard_normal((28 * 28, 10)).astype(np.float32)
    for split, n in (("train", samples), ("t10k", max(1000, samples // 6))):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = (images.reshape(n, -1).astype(np.float32) @ weights).argmax(axis=1).astype(np.uint8)
        write_idx((root / f"{split}-images-idx3-ubyte.gz").as_uri(), images, compress=False)
        write_idx((root / f"{split}-labels-idx1-ubyte.gz").as_uri(), labels, compress=False)
    return root.as_uri()


def bare_worker(data_uri: str, epochs: int, out: str) -> None:
    """The recipe's loop (runs under torchrun); rank 0 writes samples/s and graphs compiled."""
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from trainium_trainer.mnist_mlp.idx import load_split
    from trainium_trainer.mnist_mlp.model import MLP

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    xla = os.environ["TRAINIUM_RUNTIME"] == "xla"
    if world > 1:
        dist.init_process_group("gloo")
    if xla:
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.metrics as met

        device = torch_xla.device()
    else:
        device = torch.device("cpu")
    images, labels = load_split(data_uri, "train")
    per_rank = len(labels) // world
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    features = torch.from_numpy(images[mine].reshape(per_rank, -1).astype(np.float32) / 255.0)
    targets = torch.from_numpy(labels[mine].astype(np.int64))
    torch.manual_seed(0)
    model = MLP().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    def compiled() -> int:
        data = met.metric_data("CompileTime") if xla else None
        return int(data[0]) if data else 0

    steps = per_rank // BATCH
    graphs0 = compiled()
    started = time.perf_counter()
    for _ in range(epochs):
        for s in range(steps):
            x = features[s * BATCH : (s + 1) * BATCH].to(device)
            y = targets[s * BATCH : (s + 1) * BATCH].to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(x), y)
            loss.backward()
            if world > 1:
                if xla:
                    xm.mark_step()
                for p in model.parameters():
                    grad = p.grad.cpu() if xla else p.grad
                    dist.all_reduce(grad)
                    grad /= world
                    if xla:
                        p.grad.copy_(grad.to(device))
            optimizer.step()
            if xla:
                xm.mark_step()
    if xla:
        xm.wait_device_ops()
    seconds = time.perf_counter() - started
    if rank == 0:
        result = {"samples_per_second": epochs * steps * BATCH * world / seconds, "graphs": compiled() - graphs0}
        Path(out).write_text(json.dumps(result))
    if world > 1:
        dist.destroy_process_group()


def torchrun(ranks: int, runtime: str, module_args: list[str], feed: str = "") -> None:
    env = {**os.environ, "TRAINIUM_RUNTIME": runtime, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(REPO)}
    env.pop("TRAINIUM_DEVICE_FEED", None)
    if feed:
        env["TRAINIUM_DEVICE_FEED"] = feed
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
    done = subprocess.run(command + module_args, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(module_args)} failed:\n{done.stderr[-3000:]}")


def run_bare(work: Path, data_uri: str, runtime: str, ranks: int, epochs: int) -> dict:
    out = work / f"bare-{runtime}-{ranks}.json"
    args = [__file__, "--bare-worker", "--data", data_uri, "--epochs", str(epochs), "--out", str(out)]
    torchrun(ranks, runtime, args)
    return json.loads(out.read_text())


def run_ours(work: Path, data_uri: str, runtime: str, ranks: int, epochs: int, feed: str = "") -> dict:
    out = work / f"ours-{runtime}-{ranks}{feed}"
    args = ["-m", "trainium_trainer.mnist_mlp.train", "--data-uri", data_uri, "--output-uri", out.as_uri(),
            "--epochs", str(epochs), "--batch-size", str(BATCH), "--lr", str(LR), "--momentum", "0",
            "--log-every", "100"]  # fmt: skip
    torchrun(ranks, runtime, args, feed)
    metrics = json.loads((out / "metrics.json").read_text())
    return {
        "samples_per_second": metrics["samples_per_second"],
        "graphs": metrics["xla_train_graphs"],
        "feed": metrics.get("xla_device_feed") or "-",
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=60000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS for every run (0: torch's default)")
    p.add_argument("--runtimes", default="eager,xla", help="comma-separated subset of eager,xla")
    p.add_argument("--ranks", default="1,2", help="comma-separated subset of 1,2")
    p.add_argument("--compare-feeds", action="store_true", help="XLA rows: also run ours with the background loader")
    p.add_argument("--bare-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    sys.path.insert(0, str(REPO))
    if args.bare_worker:
        bare_worker(args.data, args.epochs, args.out)
        return

    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    from benchmarks.pairs import alternating_pairs, ratio_summary

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "data").mkdir()
        data_uri = write_data(work / "data", args.samples)
        for runtime in args.runtimes.split(","):
            for ranks in (int(r) for r in args.ranks.split(",")):
                pairs = alternating_pairs(
                    lambda: run_bare(work, data_uri, runtime, ranks, args.epochs),  # noqa: B023  (called at once)
                    lambda: run_ours(work, data_uri, runtime, ranks, args.epochs),  # noqa: B023
                    args.repeats,
                )
                bare, ours = [b for b, _ in pairs], [o for _, o in pairs]
                background = []
                if args.compare_feeds and runtime == "xla":
                    background = [run_ours(work, data_uri, runtime, ranks, args.epochs, "background")
                                  for _ in range(args.repeats)]  # fmt: skip
                rows.append((runtime, ranks, bare, ours, background))
                print(f"measured {runtime} x{ranks}", file=sys.stderr, flush=True)

    print(
        f"MNIST MLP 784-120-84-10, {args.samples} samples, batch {BATCH}/rank, SGD lr {LR}, {args.epochs} epoch(s), "
        f"median of {args.repeats} alternating runs, {os.cpu_count()} CPU(s), "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'default')}\n"
    )
    extra = " ours with background loader/bare |" if args.compare_feeds else ""
    header = "| runtime | ranks | ours feed | bare samples/s | ours samples/s | ours/bare | pair range |"
    header += " bare graphs | ours graphs |"
    print(header + extra)
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if extra else ""))
    for runtime, ranks, bare, ours, background in rows:
        b = statistics.median(r["samples_per_second"] for r in bare)
        o = statistics.median(r["samples_per_second"] for r in ours)
        graphs = (str(bare[-1]["graphs"]), str(ours[-1]["graphs"])) if runtime == "xla" else ("-", "-")
        ratio, spread = ratio_summary(
            [r["samples_per_second"] / q["samples_per_second"] for r, q in zip(ours, bare, strict=True)]
        )
        line = f"| {runtime} | {ranks} | {ours[-1]['feed']} | {b:,.0f} | {o:,.0f} | {ratio:.2f}x | {spread} | "
        line += f"{graphs[0]} | {graphs[1]} |"
        if extra:
            bg = statistics.median(r["samples_per_second"] for r in background) / b if background else None
            line += f" {bg:.2f}x |" if bg else " - |"
        print(line)


if __name__ == "__main__":
    main()
