"""Train the MLP data-parallel across torchrun ranks on NeuronCores, torch-xla CPU or eager CPU.

``TRAINIUM_STACK=native`` runs the same command on the native stack instead
(``trainium_trainer.mnist_mlp.native_train``: DDP on device ``neuron``, or ``cpu`` with gloo; no torch-xla).

Outputs under ``--output-uri``: ``model.safetensors``, ``model_config.json``, ``metrics.json``
(accuracy, samples/s, XLA compilations and ``history``, the train records the live stream has too) and
``_SUCCESS`` last.
``--compile-only`` runs a short trial with the same shapes to fill the compilation cache.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from trainium_trainer import boundary
from trainium_trainer.common import lean_exit
from trainium_trainer.common import uri as uris
from trainium_trainer.common.checkpoint import load_latest_checkpoint, save_checkpoint
from trainium_trainer.common.device import Runtime, init_runtime, software_versions
from trainium_trainer.common.distributed import init_distributed
from trainium_trainer.common.errors import BadInputError, job_main
from trainium_trainer.common.feed import EpochBatches, device_feed, feed_kind
from trainium_trainer.common.metrics import TrainMetrics, mark_done
from trainium_trainer.common.profile import StepProfiler
from trainium_trainer.common.stack import selected_stack
from trainium_trainer.common.stream import add_stream_args, job_peak_flops
from trainium_trainer.mnist_mlp.idx import load_split
from trainium_trainer.mnist_mlp.model import MLP

#: ``--precision`` choices (``trainium_trainer.native.device.PRECISIONS``, named here so the XLA path imports no
#: native code).
PRECISIONS = ("auto", "fp32", "bf16")

log = logging.getLogger("trainer")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data-uri", required=True)
    p.add_argument("--output-uri", default=os.environ.get(boundary.ENV_OUTPUT_URI))
    p.add_argument("--checkpoint-uri", default=os.environ.get(boundary.ENV_CHECKPOINT_URI))
    p.add_argument("--compile-cache-uri", default=os.environ.get(boundary.ENV_COMPILE_CACHE_URI))
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--eval-batch-size", type=int, default=128)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: no limit)")
    p.add_argument("--compile-only", action="store_true", help="short trial that only fills the cache")
    p.add_argument("--compile", action="store_true", help="native stack: torch.compile (neuron or inductor)")
    p.add_argument("--precision", choices=PRECISIONS, default="auto",
                   help="native stack: bf16 autocast or fp32 (auto: bf16 on Neuron, fp32 on a CPU)")  # fmt: skip
    add_stream_args(p)
    args = p.parse_args(argv)
    for name in ("epochs", "batch_size", "eval_batch_size", "log_every"):
        if getattr(args, name) < 1:
            raise BadInputError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not args.lr > 0:
        raise BadInputError(f"--lr must be > 0, got {args.lr}")
    if not args.output_uri and not args.compile_only:
        raise BadInputError(f"--output-uri (or {boundary.ENV_OUTPUT_URI}) is required")
    return args


def to_features(images: npt.NDArray[Any]) -> torch.Tensor:
    return torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / 255.0)


def evaluate(
    model: MLP,
    features: torch.Tensor,
    labels: torch.Tensor,
    runtime: Runtime,
    batch_size: int,
    max_batches: int = 0,
) -> float:
    """Accuracy with fixed-shape batches (the last one padded) so XLA compiles one evaluation graph."""
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=runtime.device)
    total = len(labels)
    with torch.no_grad():
        for b, start in enumerate(range(0, total, batch_size)):
            if max_batches and b >= max_batches:
                break
            x = features[start : start + batch_size]
            y = labels[start : start + batch_size]
            valid = len(y)
            if valid < batch_size:
                x = torch.cat([x, x.new_zeros(batch_size - valid, x.shape[1])])
                y = torch.cat([y, y.new_full((batch_size - valid,), -1)])
            pred = model(x.to(runtime.device)).argmax(dim=-1)
            correct += (pred == y.to(runtime.device)).sum()
            runtime.step()
    model.train()
    return int(runtime.to_cpu(correct)) / total if total else 0.0


class Ranks(Protocol):
    """What the sample order needs of a process group: the XLA path's ``Distributed`` or the native ``Layout``."""

    @property
    def rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...


def shard_indices(n: int, epoch: int, seed: int, dist: Ranks, batch_size: int) -> npt.NDArray[Any]:
    """This rank's sample order for ``epoch``: every rank runs the same number of full batches."""
    order = np.random.default_rng(seed + epoch).permutation(n)
    steps = n // (dist.world_size * batch_size)
    if steps == 0:
        raise BadInputError(f"{n} samples is fewer than one batch of {batch_size} per rank x {dist.world_size} ranks")
    mine = order[dist.rank :: dist.world_size][: steps * batch_size]
    return mine.reshape(steps, batch_size)


def total_steps(samples: int, args: argparse.Namespace, world_size: int) -> int:
    """Steps of the whole run: full batches per epoch x epochs, capped by ``--max-steps``."""
    max_steps: int = args.max_steps
    total: int = samples // (world_size * args.batch_size) * args.epochs
    return min(total, max_steps) if max_steps else total


Data = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def load_data(data_uri: str) -> Data:
    """Train features and labels, then the test split's, on the host (both stacks read the same)."""
    images, labels = load_split(data_uri, "train")
    test_images, test_labels = load_split(data_uri, "t10k")
    features, targets = to_features(images), torch.from_numpy(labels.astype(np.int64))
    return features, targets, to_features(test_images), torch.from_numpy(test_labels.astype(np.int64))


def model_and_optimizer(
    in_features: int, device: torch.device, args: argparse.Namespace
) -> tuple[MLP, torch.optim.SGD]:
    """The MLP on ``device`` and its SGD (both stacks train the same model the same way)."""
    model = MLP(in_features=in_features).to(device)
    # foreach=False is what torch picks on the CPU and on XLA anyway; saying so skips re-checking every
    # parameter's device at each step (2-3% of an eager MNIST step, measured in one process, alternating).
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum, foreach=False)
    return model, optimizer


def resume(model: MLP, optimizer: torch.optim.Optimizer, args: argparse.Namespace) -> tuple[int, int]:
    """(first epoch, step) after loading the newest checkpoint into ``model`` and ``optimizer``; (0, 0) without one
    or with ``--compile-only``."""
    state = None if args.compile_only else load_latest_checkpoint(args.checkpoint_uri)
    if state is None:
        return 0, 0
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["epoch"] + 1, state["step"]


def train_metrics(args: argparse.Namespace, ranks: Ranks, is_main: bool, samples: int, step: int,
                  params: list[torch.nn.Parameter]) -> TrainMetrics:  # fmt: skip
    """The run's stream and ``metrics.json`` (written by the main rank), counting samples of the whole job."""
    return TrainMetrics(args.output_uri, enabled=is_main, live=not args.compile_only,
                        total_steps=total_steps(samples, args, ranks.world_size), start_step=step,
                        items_per_step=args.batch_size * ranks.world_size, unit="samples",
                        flops_per_item=6.0 * sum(p.numel() for p in params),  # forward + backward per sample
                        peak_flops=job_peak_flops(ranks.world_size), every_s=args.stream_every_s,
                        progress_every_s=args.progress_every_s)  # fmt: skip


def run_summary(args: argparse.Namespace, metrics: TrainMetrics, runtime: Runtime, world_size: int, first_step: int,
                step: int, train_seconds: float, accuracy: float) -> dict[str, object]:  # fmt: skip
    """The summary keys both stacks write alike (``metrics.json``: the DAG's evaluation and the registry read them);
    throughput counts the steps from ``first_step`` (a resumed run's leaves out the steps before it)."""
    samples = (step - first_step) * args.batch_size * world_size
    return {
        "runtime": runtime.name,
        "world_size": world_size,
        "steps": step,
        "epochs": args.epochs,
        "batch_size_per_rank": args.batch_size,
        "accuracy": round(accuracy, 5),
        "samples_per_second": round(samples / train_seconds, 2) if train_seconds else 0.0,
        "peak_flops": metrics.peak_flops,
        "mfu": metrics.mfu(samples / train_seconds if train_seconds else None),
        "compile_only": args.compile_only,
        "software": software_versions(),
    }


def finish(args: argparse.Namespace, summary: dict[str, object], metrics: TrainMetrics, model: MLP,
           runtime: Runtime, is_main: bool) -> None:  # fmt: skip
    """Log the summary; the main rank writes the model (not on a trial), ``metrics.json`` and ``_SUCCESS`` last."""
    log.info("summary %s", json.dumps(summary, sort_keys=True))
    if is_main and args.output_uri:
        if not args.compile_only:
            save_model(model, runtime, args.output_uri, in_features=model.fc1.in_features)
        metrics.finish(summary)
        mark_done(args.output_uri)


def train(args: argparse.Namespace) -> dict[str, object]:
    runtime = init_runtime(args.compile_cache_uri)
    dist = init_distributed(runtime)
    log.info("rank %d/%d on %s (%s)", dist.rank, dist.world_size, runtime.name, runtime.device)
    torch.manual_seed(args.seed)

    features, targets, test_x, test_y = load_data(args.data_uri)
    model, optimizer = model_and_optimizer(features.shape[1], runtime.device, args)
    params = list(model.parameters())
    start_epoch, step = resume(model, optimizer, args)
    metrics = train_metrics(args, dist, dist.is_main, len(targets), step, params)
    first_step, train_seconds = step, 0.0
    profiler = StepProfiler.from_env(None if args.compile_only else args.output_uri, dist.rank)

    def report(logged: tuple[int, torch.Tensor], epoch: int) -> None:
        loss = round(float(runtime.to_cpu(logged[1])), 5)
        metrics.train(step=logged[0], epoch=epoch, loss=loss, lr=args.lr, xla_graphs=runtime.compilations())

    activity = dict.fromkeys(runtime.activity(), 0)
    done = False
    shuffled = EpochBatches(
        (features, targets),
        lambda epoch: shard_indices(len(targets), epoch, args.seed, dist, args.batch_size),
        range(start_epoch, args.epochs),
    )
    with shuffled:
        for epoch, batches in shuffled:
            t0 = time.perf_counter()
            before = runtime.activity()
            logged: tuple[int, torch.Tensor] | None = None
            with device_feed(batches, runtime) as feed:
                for x, y in feed:
                    if logged is not None:  # read after the graph that computed it ran: a transfer, no new graph
                        report(logged, epoch)
                        logged = None
                    profiler.before_step(step + 1)
                    optimizer.zero_grad()
                    loss = F.nll_loss(model(x), y)
                    loss.backward()
                    dist.all_reduce_gradients(params, runtime)
                    optimizer.step()
                    step += 1
                    profiler.after_step(step)
                    if step % args.log_every == 0:
                        logged = (step, loss.detach())
                    if args.max_steps and step >= args.max_steps:
                        done = True
                        break
            runtime.step()  # the epoch's last step, when the feed did not run out (a no-op otherwise)
            runtime.wait()  # the epoch after next gathers into the buffers this one's transfers read
            if logged is not None:
                report(logged, epoch)
            train_seconds += time.perf_counter() - t0
            for key, value in runtime.activity().items():
                activity[key] += value - before[key]
            if not args.compile_only and args.checkpoint_uri and dist.is_main:
                host_state = {
                    "model": runtime.to_cpu(model.state_dict()),
                    "optimizer": runtime.to_cpu(optimizer.state_dict()),
                    "epoch": epoch,
                    "step": step,
                }
                save_checkpoint(args.checkpoint_uri, step, host_state)
            dist.barrier()
            if done:
                break
    train_seconds += shuffled.waited_s  # a later epoch's gather that outlasted the epoch before it
    profiler.close()  # a run that ended inside the profiled steps still writes them

    accuracy = evaluate(model, test_x, test_y, runtime, args.eval_batch_size, max_batches=2 if args.compile_only else 0)
    metrics.eval(step=step, accuracy=accuracy)
    metrics.close()
    cache = runtime.cache_counts()
    summary: dict[str, object] = {
        **run_summary(args, metrics, runtime, dist.world_size, first_step, step, train_seconds, accuracy),
        "xla_compilations": runtime.compilations(),
        "xla_train_graphs": activity["compiled"],
        "xla_train_graphs_run": activity["executed"],
        "xla_train_host_transfers": activity["host_transfers"],
        "xla_device_feed": feed_kind(runtime) if runtime.is_xla else None,
        "xla_cache_found": cache["found"],
        "xla_cache_missing": cache["missing"],
    }
    finish(args, summary, metrics, model, runtime, dist.is_main)
    dist.barrier()
    dist.close()
    return summary


def save_model(model: MLP, runtime: Runtime, output_uri: str, in_features: int) -> None:
    from safetensors.torch import save

    tensors = {k: v.cpu().contiguous() for k, v in runtime.to_cpu(model.state_dict()).items()}
    uris.write_bytes(uris.join(output_uri, "model.safetensors"), save(tensors))
    uris.write_json(
        uris.join(output_uri, "model_config.json"),
        {"architecture": "mlp", "in_features": in_features, "hidden": [120, 84], "classes": 10},
    )


@job_main
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if selected_stack() == boundary.STACK_NATIVE:
        from trainium_trainer.mnist_mlp import native_train

        native_train.train(args)
    else:
        train(args)


if __name__ == "__main__":
    lean_exit.run(main)
