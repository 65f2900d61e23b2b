"""Pretrain or fine-tune the Llama model data-parallel (and tensor-parallel on Neuron) across torchrun ranks.

``python -m trainium_trainer.llama.train --data-uri URI --output-uri URI --max-steps N [--base-model-uri URI] ...``

- Runtimes: Neuron (neuronx-distributed: TP + ZeRO-1, bf16), torch-xla CPU or eager CPU (data parallel
  through trainium_trainer.common). Set ``TRAINIUM_RUNTIME`` to force one.
- Every ``--log-every`` steps the main rank records one train record (``trainium_trainer.common.metrics``): loss (mean
  over ranks), tokens/s and MFU against ``TRAINIUM_PEAK_FLOPS`` (none without it). The records stream to
  ``<output-uri>/stream/train/`` every ``--stream-every-s``, a progress line (step, loss, tokens/s, MFU, ETA,
  cost so far) is logged every ``--progress-every-s``, and ``metrics.json`` keeps them as its ``history``.
- Every ``--checkpoint-every`` steps a checkpoint (model, optimizer, scheduler, RNG, data position) goes
  to ``--checkpoint-uri``, keeping the last ``--keep-checkpoints``; a rerun resumes from the newest one
  and ends where an uninterrupted run would.
- Output: ``model.safetensors``, ``config.json``, ``tokenizer.json``, ``metrics.json``, ``_SUCCESS`` last.
  A rerun of the same job (same ``TRAINIUM_JOB_HASH``) whose output is complete does nothing.
- ``--compile-only``: a short trial with the real shapes that fills the compilation cache.
- ``TRAINIUM_STACK=native``: the native stack's trainer instead (``trainium_trainer.llama.native_train``: FSDP2 +
  DTensor TP, DCP checkpoints), with the same arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from trainium_trainer import boundary
from trainium_trainer.common import lean_exit
from trainium_trainer.common import uri as uris
from trainium_trainer.common.checkpoint import (
    CheckpointError,
    load_latest_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from trainium_trainer.common.device import Runtime, init_runtime
from trainium_trainer.common.distributed import Distributed, init_distributed
from trainium_trainer.common.errors import BadInputError, job_main
from trainium_trainer.common.feed import device_feed, gather_batches
from trainium_trainer.common.inputs import check_input
from trainium_trainer.common.metrics import TrainMetrics, finished_summary, mark_done
from trainium_trainer.common.stack import selected_stack
from trainium_trainer.common.stream import add_stream_args, job_peak_flops
from trainium_trainer.llama import neuron
from trainium_trainer.llama.data import load_blocks, read_index
from trainium_trainer.llama.hf_checkpoint import HFCheckpoint
from trainium_trainer.llama.hf_export import DEFAULT_MAX_SHARD_BYTES, save_model, write_tokenizer
from trainium_trainer.llama.model import base_model, build_config
from trainium_trainer.llama.presets import PRESETS, flops_per_token

log = logging.getLogger("trainer")
PRECISIONS = ("auto", "fp32", "bf16")


def add_lm_args(p: argparse.ArgumentParser) -> None:
    """The run's length, batch, optimizer, schedule, logging and checkpoint settings: every language-model trainer
    (XLA, native, TorchTitan) takes them alike, with the same defaults."""
    p.add_argument("--max-steps", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=8, help="sequences per data-parallel rank")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--checkpoint-every", type=int, default=0, help="0: only at the end")
    p.add_argument("--keep-checkpoints", type=int, default=2)
    p.add_argument("--eval-batches", type=int, default=0, help="0: the whole held-out split")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-uri", required=True)
    p.add_argument("--output-uri", default=env(boundary.ENV_OUTPUT_URI))
    p.add_argument("--checkpoint-uri", default=env(boundary.ENV_CHECKPOINT_URI))
    p.add_argument("--compile-cache-uri", default=env(boundary.ENV_COMPILE_CACHE_URI))
    p.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    p.add_argument(
        "--base-model-uri",
        default=None,
        help="Hugging Face model directory: config.json, model.safetensors or shards + index, tokenizer files",
    )
    p.add_argument(
        "--max-shard-bytes",
        type=int,
        default=DEFAULT_MAX_SHARD_BYTES,
        help="largest output weight file; larger models are split into shards with an index",
    )
    add_lm_args(p)
    p.add_argument("--precision", choices=PRECISIONS, default="auto", help="auto: bf16 on Neuron, fp32 elsewhere")
    p.add_argument("--tensor-parallel-size", type=int, default=int(env(boundary.ENV_TENSOR_PARALLEL_SIZE, "1")))
    p.add_argument("--zero1", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--sequence-parallel", action="store_true")
    p.add_argument("--activation-checkpointing", action="store_true")
    p.add_argument("--compile-only", action="store_true", help="short trial that only fills the cache")
    p.add_argument("--compile", action="store_true", help="native stack: torch.compile (neuron or inductor)")
    p.add_argument("--stop-at-step", type=int, default=0,
                   help="native stack: checkpoint and stop after this step, as a preempted job does")  # fmt: skip
    add_stream_args(p)
    args = p.parse_args(argv)
    if args.stop_at_step < 0:
        raise BadInputError(f"--stop-at-step must be >= 0, got {args.stop_at_step}")
    for name in ("max_steps", "batch_size", "log_every", "tensor_parallel_size"):
        if getattr(args, name) < 1:
            raise BadInputError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not args.lr > 0:
        raise BadInputError(f"--lr must be > 0, got {args.lr}")
    if not 0 < args.min_lr_ratio <= 1:
        raise BadInputError(f"--min-lr-ratio must be in (0, 1], got {args.min_lr_ratio}")
    if not args.output_uri and not args.compile_only:
        raise BadInputError(f"--output-uri (or {boundary.ENV_OUTPUT_URI}) is required")
    return args


def lr_lambda(warmup: int, total: int, min_ratio: float) -> Callable[[int], float]:
    """Linear warmup then cosine decay to ``min_ratio``; never exactly 0, so XLA sees no new constant."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


@dataclass
class DataOrder:
    """Which blocks each step reads: a fresh permutation per epoch, each data-parallel rank its own slice.

    The position is a pure function of the step, so a resumed run reads exactly what the original would.
    """

    n_blocks: int
    batch_size: int
    data_rank: int
    data_world: int
    seed: int

    @property
    def steps_per_epoch(self) -> int:
        return self.n_blocks // (self.batch_size * self.data_world)

    def position(self, step: int) -> tuple[int, int]:
        return divmod(step, self.steps_per_epoch)

    def epoch_order(self, epoch: int) -> npt.NDArray[Any]:
        """This rank's blocks for every step of ``epoch``, shape ``(steps_per_epoch, batch_size)``."""
        order = np.random.default_rng(self.seed + epoch).permutation(self.n_blocks)
        mine = order[self.data_rank :: self.data_world][: self.steps_per_epoch * self.batch_size]
        return mine.reshape(self.steps_per_epoch, self.batch_size)

    def batch(self, step: int) -> npt.NDArray[Any]:
        epoch, index = self.position(step)
        blocks: npt.NDArray[Any] = self.epoch_order(epoch)[index]
        return blocks


def evaluate_loss(
    model: torch.nn.Module,
    blocks: npt.NDArray[Any],
    runtime: Runtime,
    batch_size: int,
    max_batches: int = 0,
    autocast: Any = None,
) -> float:
    """Mean next-token loss over ``blocks``, in fixed-shape batches (the last padded and masked)."""
    model.eval()
    total = torch.zeros((), dtype=torch.float32, device=runtime.device)
    count = torch.zeros((), dtype=torch.float32, device=runtime.device)
    runtime.step()  # the accumulators are inputs of every batch's graph, the first included
    with torch.no_grad():
        for b, start in enumerate(range(0, len(blocks), batch_size)):
            if max_batches and b >= max_batches:
                break
            chunk = torch.from_numpy(blocks[start : start + batch_size])
            labels = chunk.clone()
            if len(chunk) < batch_size:
                pad = batch_size - len(chunk)
                chunk = torch.cat([chunk, chunk.new_zeros(pad, chunk.shape[1])])
                labels = torch.cat([labels, labels.new_full((pad, labels.shape[1]), -100)])
            x, y = chunk.to(runtime.device), labels.to(runtime.device)
            with autocast or _null():
                logits = model(input_ids=x).logits.float()
            loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]), y[:, 1:].reshape(-1), ignore_index=-100, reduction="sum"
            )
            total += loss
            count += (y[:, 1:] != -100).sum()
            runtime.step()
    model.train()
    total_cpu, count_cpu = float(runtime.to_cpu(total)), float(runtime.to_cpu(count))
    return total_cpu / count_cpu if count_cpu else float("nan")


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def make_autocast(precision: str, runtime: Runtime) -> Any:
    if precision == "auto":
        precision = "bf16" if runtime.name == "neuron" else "fp32"
    if precision == "fp32":
        return None
    return torch.autocast(device_type="xla" if runtime.is_xla else "cpu", dtype=torch.bfloat16)


def train(args: argparse.Namespace) -> dict[str, Any]:
    done = None if args.compile_only else finished_summary(args.output_uri)
    if done is not None:
        return done
    index = read_index(args.data_uri)
    runtime = init_runtime(args.compile_cache_uri)
    dist = init_distributed(runtime)
    use_nxd = runtime.name == "neuron" and neuron.available()
    if args.tensor_parallel_size > 1 and not use_nxd:
        raise BadInputError("--tensor-parallel-size > 1 needs neuronx-distributed (the Neuron training image)")
    log.info(
        "rank %d/%d on %s (%s)%s",
        dist.rank,
        dist.world_size,
        runtime.name,
        runtime.device,
        " with neuronx-distributed" if use_nxd else "",
    )

    train_blocks = load_blocks(args.data_uri, "train")
    eval_blocks = load_blocks(args.data_uri, "eval")
    seq_len = int(index["block_size"])
    base = HFCheckpoint(args.base_model_uri) if args.base_model_uri else None
    config = build_config(args.preset, int(index["vocab_size"]), base)

    data_rank, data_world = dist.rank, dist.world_size
    if use_nxd:
        parallel = neuron.NeuronParallel(
            args.tensor_parallel_size,
            args.zero1,
            args.max_grad_norm,
            args.sequence_parallel,
            args.activation_checkpointing,
            neuron.platform_lnc_size(),
        )
        parallel.check(config, dist.world_size)
        local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        per_rank = neuron.check_host_memory(config, parallel.tensor_parallel_size, local_ranks,
                                            neuron.host_memory_bytes())  # fmt: skip
        log.info("host memory for weights: %.2f GiB per rank x %d ranks", per_rank / 2**30, local_ranks)
        nxd_config = neuron.make_config(parallel)
        model = neuron.parallel_model(nxd_config, config, args.seed, base)
        optimizer = neuron.parallel_optimizer(nxd_config, model, args.lr, args.weight_decay)
        data_rank, data_world = neuron.data_parallel_layout()
    else:
        model = base_model(config, args.seed, base).to(runtime.device)
        decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "norm" not in n]
        no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 or "norm" in n]
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=args.lr,
            betas=(0.9, 0.95),
            foreach=False,
        )
    params = [p for p in model.parameters() if p.requires_grad]
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda(args.warmup_steps, args.max_steps, args.min_lr_ratio)
    )
    order = DataOrder(len(train_blocks), args.batch_size, data_rank, data_world, args.seed)
    if order.steps_per_epoch == 0:
        raise BadInputError(
            f"{len(train_blocks)} training blocks is fewer than one batch of {args.batch_size} "
            f"per rank x {data_world} data-parallel ranks"
        )
    autocast = make_autocast(args.precision, runtime)
    torch.manual_seed(args.seed + dist.rank)
    random.seed(args.seed)
    np.random.seed(args.seed)

    step, resumed_from = 0, None
    if not args.compile_only and args.checkpoint_uri:
        step = resume(args, runtime, model, optimizer, scheduler, order, use_nxd)
        resumed_from = step or None

    per_token = flops_per_token(config, seq_len)
    tokens_per_step = args.batch_size * seq_len * data_world
    metrics = TrainMetrics(args.output_uri, enabled=dist.is_main, live=not args.compile_only,
                           total_steps=args.max_steps, start_step=step, items_per_step=tokens_per_step,
                           unit="tokens", flops_per_item=per_token, peak_flops=job_peak_flops(dist.world_size),
                           every_s=args.stream_every_s, progress_every_s=args.progress_every_s)  # fmt: skip
    window_tokens, window_start, train_seconds, trained_tokens = 0, time.perf_counter(), 0.0, 0
    last_loss = float("nan")

    def checkpoint_due(at: int) -> bool:
        every = args.checkpoint_every
        return bool(not args.compile_only and args.checkpoint_uri and every and at % every == 0 and at < args.max_steps)

    def after_step(at: int, loss: torch.Tensor) -> None:
        """Log and checkpoint step ``at``. Runs once that step's graph has run (the next batch's sync), so
        reading the loss and the state are transfers, not extra graphs."""
        nonlocal window_tokens, window_start, train_seconds, trained_tokens, last_loss
        if at % args.log_every == 0 or at == args.max_steps:
            mean_loss = dist.all_reduce_sum(loss.float(), runtime) / dist.world_size
            last_loss = float(mean_loss)
            train_seconds += time.perf_counter() - window_start
            trained_tokens += window_tokens
            epoch, _ = order.position(at - 1)
            metrics.train(step=at, epoch=epoch, loss=last_loss, lr=float(scheduler.get_last_lr()[0]),
                          xla_graphs=runtime.compilations())  # fmt: skip
            window_tokens, window_start = 0, time.perf_counter()
        if checkpoint_due(at):
            checkpoint(args, runtime, dist, model, optimizer, scheduler, order, at, use_nxd)

    tokens = torch.from_numpy(train_blocks)
    activity_before = runtime.activity()
    model.train()
    while step < args.max_steps:
        # One feed per epoch (or what is left of it): this rank's blocks in order, gathered once.
        epoch, offset = order.position(step)
        count = min(args.max_steps - step, order.steps_per_epoch - offset)
        batches = gather_batches((tokens,), order.epoch_order(epoch)[offset : offset + count])
        pending: tuple[int, torch.Tensor] | None = None
        with device_feed(batches, runtime) as feed:
            for (x,) in feed:  # on XLA, taking the next batch runs the previous step's graph
                if pending is not None:
                    after_step(*pending)
                    pending = None
                with autocast or _null():
                    loss = model(input_ids=x, labels=x).loss
                loss.backward()
                if not use_nxd:  # the NxD optimizer wrapper all-reduces and clips inside step()
                    dist.all_reduce_gradients(params, runtime)
                    if args.max_grad_norm > 0:
                        torch.nn.utils.clip_grad_norm_(params, args.max_grad_norm)
                optimizer.step()
                scheduler.step()
                # torch's optimizer sets grads to None (zeroing them in place costs host time per step on XLA);
                # NxD's wrapper defaults to set_to_none=False and zeroes in place, as its own examples run it
                optimizer.zero_grad()
                step += 1
                window_tokens += tokens_per_step
                if step % args.log_every == 0 or step == args.max_steps or checkpoint_due(step):
                    pending = (step, loss.detach())
        runtime.step()  # a no-op when the feed ran out: the loader already ran the last graph
        if pending is not None:
            after_step(*pending)
    activity = {key: value - activity_before[key] for key, value in runtime.activity().items()}
    if window_tokens:
        train_seconds += time.perf_counter() - window_start
        trained_tokens += window_tokens
    if not args.compile_only and args.checkpoint_uri and step > 0:
        checkpoint(args, runtime, dist, model, optimizer, scheduler, order, step, use_nxd)

    eval_loss = evaluate_loss(
        model,
        eval_blocks if len(eval_blocks) else train_blocks[: args.batch_size],
        runtime,
        args.batch_size,
        2 if args.compile_only else args.eval_batches,
        autocast,
    )
    metrics.eval(step=step, loss=eval_loss)
    metrics.close()
    cache = runtime.cache_counts()
    tokens_per_s = trained_tokens / train_seconds if train_seconds else 0.0
    parameters = sum(p.numel() for p in params) * (args.tensor_parallel_size if use_nxd else 1)
    summary: dict[str, Any] = {
        "runtime": runtime.name,
        "neuronx_distributed": use_nxd,
        "world_size": dist.world_size,
        "data_parallel_size": data_world,
        "tensor_parallel_size": args.tensor_parallel_size,
        **lm_summary(metrics, args.preset, parameters, seq_len, args.batch_size, step, resumed_from, last_loss,
                     eval_loss, tokens_per_s),
        "xla_compilations": runtime.compilations(),
        "xla_train_graphs_run": activity["executed"],
        "xla_train_host_transfers": activity["host_transfers"],
        "xla_cache_found": cache["found"],
        "xla_cache_missing": cache["missing"],
        "compile_only": args.compile_only,
        "base_model_uri": args.base_model_uri,
        "data_uri": args.data_uri,
    }  # fmt: skip
    if base is not None and dist.is_main and not args.compile_only:
        summary["base_model"] = base.fingerprint()  # lineage: flat, so the registry manifest keeps it
    log.info("summary %s", json.dumps(summary, sort_keys=True))
    export_model(args, runtime, dist, model, config, use_nxd)
    if dist.is_main and args.output_uri:
        if not args.compile_only:
            write_beside_model(args, summary, config.max_position_embeddings)
        metrics.finish(summary)
        mark_done(args.output_uri)
    dist.barrier()
    dist.close()
    return summary


def lm_summary(
    metrics: TrainMetrics,
    preset: str,
    parameters: int,
    seq_len: int,
    batch_size: int,
    steps: int,
    resumed_from: int | None,
    last_loss: float,
    eval_loss: float,
    tokens_per_s: float,
) -> dict[str, Any]:
    """The summary figures every language-model trainer (XLA, native, TorchTitan) reports alike, so the DAGs,
    the registry and the view read one set of keys; MFU is null where no time was measured."""
    return {
        "preset": preset,
        "parameters": parameters,
        "seq_len": seq_len,
        "batch_size_per_rank": batch_size,
        "steps": steps,
        "resumed_from_step": resumed_from,
        "final_loss": round(last_loss, 6),
        "eval_loss": round(eval_loss, 6),
        "tokens_per_s": round(tokens_per_s, 1),
        "flops_per_token": metrics.flops_per_item,
        "peak_flops": metrics.peak_flops,
        "mfu": metrics.mfu(tokens_per_s) if tokens_per_s else None,
    }


def write_beside_model(args: argparse.Namespace, summary: dict[str, Any], max_positions: int) -> None:
    """The tokenizer files and ``lineage.json`` (the base model's fingerprint, the data) next to the weights."""
    write_tokenizer(args.output_uri, args.data_uri, args.base_model_uri, max_positions)
    lineage = {"base_model": summary.get("base_model"), "data_uri": args.data_uri}
    uris.write_json(uris.join(args.output_uri, "lineage.json"), lineage)


def export_model(
    args: argparse.Namespace, runtime: Runtime, dist: Distributed, model: Any, config: Any, use_nxd: bool
) -> None:
    """The Hugging Face output. On neuronx-distributed every rank joins the tensor-parallel gathers and
    rank 0 writes; those gathers are XLA graphs (one per sharded shape), so the compile trial runs them too,
    writing nothing: under ``neuron_parallel_compile`` that puts their NEFFs in the cache and the real run's
    export compiles nothing. Without NxD the export only copies device tensors to the host (no graph), so
    the trial skips it."""
    if use_nxd:
        if args.output_uri or args.compile_only:
            write = dist.is_main and not args.compile_only
            neuron.save_full_model(model, config, args.output_uri, write, args.max_shard_bytes)
    elif args.output_uri and not args.compile_only and dist.is_main:
        save_model(runtime.to_cpu(model.state_dict()), config, args.output_uri, args.max_shard_bytes)


def checkpoint(
    args: argparse.Namespace,
    runtime: Runtime,
    dist: Distributed,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    order: DataOrder,
    step: int,
    use_nxd: bool,
) -> None:
    epoch, batch = order.position(step)
    user = {
        "step": step,
        "data_position": {"epoch": epoch, "batch": batch},
        "rng": rng_state(runtime.is_xla),
        "world_size": dist.world_size,
        "seed": args.seed,
    }
    if use_nxd:
        tag = neuron.save(args.checkpoint_uri, step, model, optimizer, scheduler, user, args.keep_checkpoints)
        dist.barrier()
        if dist.is_main:  # the pointer moves only once every rank's shards are written
            uris.write_json(uris.join(args.checkpoint_uri, "latest.json"), {"step": step, "tag": tag})
        return
    if dist.is_main:
        state = {
            **user,
            "model": runtime.to_cpu(model.state_dict()),
            "optimizer": runtime.to_cpu(optimizer.state_dict()),
            "scheduler": scheduler.state_dict(),
        }
        save_checkpoint(args.checkpoint_uri, step, state, keep_last=args.keep_checkpoints)
    dist.barrier()


def resume(
    args: argparse.Namespace,
    runtime: Runtime,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    order: DataOrder,
    use_nxd: bool,
) -> int:
    """Restore the newest complete checkpoint; returns the step to continue from (0: none)."""
    user: dict[str, Any] | None
    if use_nxd:
        pointer = uris.join(args.checkpoint_uri, "latest.json")
        if not uris.exists(pointer):
            return 0
        latest = uris.read_json(pointer)
        step = latest.get("step")
        if not isinstance(step, int) or latest.get("tag") != neuron.checkpoint_tag(step):
            raise CheckpointError(f"{pointer}: 'tag' must be step_<8 digits> for its 'step', got {latest!r}")
        user = neuron.load(args.checkpoint_uri, latest["tag"], model, optimizer, scheduler) or {}
    else:
        user = load_latest_checkpoint(args.checkpoint_uri)
        if user is None:
            return 0
        model.load_state_dict(user["model"])
        optimizer.load_state_dict(user["optimizer"])
        scheduler.load_state_dict(user["scheduler"])
    step = int(user["step"])
    if "rng" in user:
        set_rng_state(user["rng"], runtime.is_xla)
    expected = user.get("data_position")
    if expected and tuple(expected.values()) != order.position(step):
        log.warning(
            "checkpoint data position %s differs from this layout's %s (world size changed?)",
            expected,
            order.position(step),
        )
    log.info("resumed at step %d (epoch %d, batch %d)", step, *order.position(step))
    return step


@job_main
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    check_input("--base-model-uri", args.base_model_uri)
    check_input("--data-uri", args.data_uri)
    if selected_stack() == boundary.STACK_NATIVE:
        from trainium_trainer.llama import native_train

        native_train.train(args)
        return
    train(args)


if __name__ == "__main__":
    lean_exit.run(main)
