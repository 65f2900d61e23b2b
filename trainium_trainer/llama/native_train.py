"""The Llama trainer on the native stack (``TRAINIUM_STACK=native``): FSDP2 over ``dp`` and DTensor tensor
parallel over ``tp`` on one 2-D device mesh, DCP checkpoints, a Hugging Face directory out.

Same command line, data, metrics and outputs as the XLA path (``trainium_trainer.llama.train``), which dispatches
here. Device ``neuron`` with TorchNeuron, ``cpu`` with gloo otherwise (``trainium_trainer.native.device``).
A rerun resumes from the newest DCP checkpoint and ends exactly where an uninterrupted run would: the data
order is a function of the step, the model has no training-time randomness (no dropout in the presets), and
the model, optimizer and scheduler come back from the shards.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
import time
from typing import Any, cast

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

from trainium_trainer import boundary
from trainium_trainer.common.errors import BadInputError
from trainium_trainer.common.metrics import TrainMetrics, finished_summary, mark_done
from trainium_trainer.common.stream import job_peak_flops
from trainium_trainer.llama.data import load_blocks, read_index
from trainium_trainer.llama.hf_checkpoint import HFCheckpoint
from trainium_trainer.llama.hf_export import save_model
from trainium_trainer.llama.model import build_config
from trainium_trainer.llama.presets import flops_per_token
from trainium_trainer.native import checkpoint as dcp_checkpoint
from trainium_trainer.native.compile_cache import configure_compile_cache, inductor_cache_counts
from trainium_trainer.native.device import CPU, NativeDevice, init_device
from trainium_trainer.native.hf_load import load_sharded_base, seeded_init_on_node
from trainium_trainer.native.parallel import (
    Layout,
    check_layout,
    clip_grad_norm,
    device_mesh,
    init_process_group,
    parallelize_llama,
)

log = logging.getLogger("trainer")
#: transformers' attention through ``torch.nn.functional.scaled_dot_product_attention``: one fused op where
#: the device has a kernel for it and PyTorch's own math decomposition where it has not (TorchTitan's choice
#: too); the XLA path keeps its eager attention.
ATTENTION = "sdpa"


def param_dtype(precision: str, device: NativeDevice) -> torch.dtype | None:
    """FSDP2 computes in bf16 where autocast would (``auto`` on neuron, ``bf16``); fp32 master weights stay."""
    return torch.bfloat16 if precision == "bf16" or (precision == "auto" and device.type == "neuron") else None


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "norm" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 or "norm" in n]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), foreach=False)


def init_folder() -> str:
    """Where the node writes its seeded initialization: one folder per launch (torchrun's run id), on the node's
    own disk, the same for every rank of the node."""
    launch = os.environ.get("TORCHELASTIC_RUN_ID") or f"pid{os.getppid()}"
    return os.path.join(tempfile.gettempdir(), f"trainium-llama-init-{launch}")


def mean_over_data_ranks(value: torch.Tensor, layout: Layout) -> float:
    """Every rank's loss summed and divided by the ranks (tp ranks of one batch hold the same loss)."""
    total = value.detach().float().clone()
    if layout.world_size > 1:
        dist.all_reduce(total)
    return float(total.cpu()) / layout.world_size


def evaluate(model: torch.nn.Module, blocks: Any, device: NativeDevice, batch_size: int, max_batches: int,
             precision: str, layout: Layout) -> float:  # fmt: skip
    """Mean next-token loss over ``blocks`` (every rank the same batches: FSDP's gathers are collective)."""
    model.eval()
    total, count = torch.zeros((), device=device.device), torch.zeros((), device=device.device)
    with torch.no_grad():
        for b, start in enumerate(range(0, len(blocks), batch_size)):
            if max_batches and b >= max_batches:
                break
            x = torch.from_numpy(blocks[start : start + batch_size]).to(device.device)
            with device.autocast(precision):
                logits = model(input_ids=x).logits.float()
            total += torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum"
            )
            count += x[:, 1:].numel()
    model.train()
    return float(total.cpu()) / float(count.cpu()) if float(count.cpu()) else float("nan")


def train(args: argparse.Namespace) -> dict[str, Any]:
    # the XLA path's module: shared pieces
    from trainium_trainer.llama.train import DataOrder, lm_summary, lr_lambda, write_beside_model

    done = None if args.compile_only else finished_summary(args.output_uri)
    if done is not None:
        return done
    index = read_index(args.data_uri)
    base = HFCheckpoint(args.base_model_uri) if args.base_model_uri else None
    config = build_config(args.preset, int(index["vocab_size"]), base)
    device = init_device()
    cache = configure_compile_cache(device.type, args.compile_cache_uri)  # before the first compilation reads it
    world = init_process_group(device)
    check_layout(world.world_size, args.tensor_parallel_size, config)
    layout = Layout(world.rank, world.world_size, args.tensor_parallel_size)
    mesh = device_mesh(device, layout)
    log.info("rank %d/%d on %s (%s), mesh dp=%d x tp=%d", layout.rank, layout.world_size, device.type,
             device.backend, layout.data_parallel_size, layout.tensor_parallel_size)  # fmt: skip

    train_blocks, eval_blocks = load_blocks(args.data_uri, "train"), load_blocks(args.data_uri, "eval")
    seq_len = int(index["block_size"])
    dtype = param_dtype(args.precision, device)
    if base is None:
        # a pretraining run shards its seeded initialization the way a fine-tune shards its base: written once
        # per node, then each rank reads only its shards
        folder = init_folder()
        source = seeded_init_on_node(config, args.seed, folder)
    model, base_read = load_sharded_base(config, base or source, args.seed,
                                         lambda m: parallelize_llama(m, mesh, dtype), device.device,
                                         ATTENTION)  # fmt: skip
    if base is None:
        dist.barrier()  # every rank of the node has read it
        if os.environ.get("LOCAL_RANK", "0") == "0":
            shutil.rmtree(folder, ignore_errors=True)
    log.info("%s: this rank read %d of %d elements (%.3f) of %d tensors", base.uri if base else "initialization",
             base_read.elements_read, base_read.elements_total, base_read.fraction, base_read.tensors)  # fmt: skip
    parameters = sum(p.numel() for p in model.parameters())  # a DTensor counts its global elements
    model = device.compile(model, args.compile)
    optimizer = make_optimizer(model, args.lr, args.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(args.warmup_steps, args.max_steps,
                                                                       args.min_lr_ratio))  # fmt: skip
    params = [p for p in model.parameters() if p.requires_grad]
    order = DataOrder(len(train_blocks), args.batch_size, layout.data_rank, layout.data_parallel_size, args.seed)
    if order.steps_per_epoch == 0:
        raise BadInputError(f"{len(train_blocks)} training blocks is fewer than one batch of {args.batch_size} "
                            f"per rank x {layout.data_parallel_size} data-parallel ranks")  # fmt: skip

    step = 0
    # the compile trial (--compile-only) runs the real steps from scratch and keeps nothing but its summary:
    # with --compile it fills torch.compile's caches; without, it proves the command and layout run
    saved = None if args.compile_only else dcp_checkpoint.latest(args.checkpoint_uri)
    if saved:
        step = dcp_checkpoint.load(args.checkpoint_uri, saved, model, optimizer, scheduler)
    resumed_from = step or None
    stop = min(args.max_steps, args.stop_at_step or args.max_steps)

    per_token = flops_per_token(config, seq_len)
    tokens_per_step = args.batch_size * seq_len * layout.data_parallel_size
    metrics = TrainMetrics(args.output_uri, enabled=layout.is_main, total_steps=args.max_steps, start_step=step,
                           items_per_step=tokens_per_step, unit="tokens", flops_per_item=per_token,
                           peak_flops=job_peak_flops(layout.world_size), live=not args.compile_only,
                           every_s=args.stream_every_s,
                           progress_every_s=args.progress_every_s)  # fmt: skip
    tokens = torch.from_numpy(train_blocks)
    last_loss, trained_tokens, started = float("nan"), 0, time.perf_counter()
    model.train()
    while step < stop:
        x = tokens[torch.from_numpy(order.batch(step))].to(device.device)
        with device.autocast(args.precision):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        clip_grad_norm(params, args.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        step += 1
        trained_tokens += tokens_per_step
        if step % args.log_every == 0 or step == args.max_steps or step == stop:
            last_loss = mean_over_data_ranks(loss, layout)
            metrics.train(step=step, epoch=order.position(step - 1)[0], loss=last_loss,
                          lr=float(scheduler.get_last_lr()[0]))  # fmt: skip
        due = args.checkpoint_every and step % args.checkpoint_every == 0
        if args.checkpoint_uri and not args.compile_only and (due or step == stop):
            dcp_checkpoint.save(args.checkpoint_uri, step, model, optimizer, scheduler, args.keep_checkpoints)
    train_seconds = time.perf_counter() - started
    if step < args.max_steps:
        log.info("stopped at step %d of %d (--stop-at-step); a rerun resumes here", step, args.max_steps)
        metrics.close()
        dist.destroy_process_group()
        return {"steps": step, "stopped": True}

    eval_loss = evaluate(model, eval_blocks if len(eval_blocks) else train_blocks[: args.batch_size], device,
                         args.batch_size, 2 if args.compile_only else args.eval_batches, args.precision,
                         layout)  # fmt: skip
    metrics.eval(step=step, loss=eval_loss)
    tokens_per_s = trained_tokens / train_seconds if train_seconds and trained_tokens else 0.0
    summary: dict[str, Any] = {
        "runtime": device.type,
        "stack": boundary.STACK_NATIVE,
        "process_group_backend": device.backend,
        "world_size": layout.world_size,
        "data_parallel_size": layout.data_parallel_size,
        "tensor_parallel_size": layout.tensor_parallel_size,
        **lm_summary(metrics, args.preset, parameters, seq_len, args.batch_size, step, resumed_from, last_loss,
                     eval_loss, tokens_per_s),
        "compiled": bool(args.compile),
        **cache.summary(),
        "compile_cache": inductor_cache_counts() if args.compile and device.type == CPU else None,
        "compile_only": args.compile_only,
        "base_model_uri": args.base_model_uri,
        # rank 0's share of the base (fine-tune) or of the seeded initialization (pretraining) it read
        "base_read_fraction": round(base_read.fraction, 6),
        "data_uri": args.data_uri,
    }  # fmt: skip
    if base is not None and layout.is_main and not args.compile_only:
        summary["base_model"] = base.fingerprint()
    log.info("summary %s", json.dumps(summary, sort_keys=True))
    # every rank joins the gathers; rank 0 receives the whole state dict on the host and writes it (the trial
    # writes no model: every rank skips the gathers alike)
    full = (
        None
        if args.compile_only
        else get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    )
    if layout.is_main and args.output_uri:
        if full is not None:
            # a full state dict offloaded to the host holds plain tensors only (no DTensor, no nested state)
            save_model(cast(dict[str, torch.Tensor], full), config, args.output_uri, args.max_shard_bytes)
            write_beside_model(args, summary, config.max_position_embeddings)
        metrics.finish(summary)
        mark_done(args.output_uri)
    else:
        metrics.close()
    dist.barrier()  # every rank of the node has compiled: its mirror of a remote compile cache is complete
    cache.push()
    dist.destroy_process_group()
    return summary
