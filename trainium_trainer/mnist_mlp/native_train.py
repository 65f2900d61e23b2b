"""The MNIST MLP on the native stack (``TRAINIUM_STACK=native``): plain DDP on the native device.

Same command line, data order, outputs and summary keys as the XLA path (``trainium_trainer.mnist_mlp.train``, which
dispatches here), so the DAG's evaluation and registration read it unchanged. Device ``neuron`` with
TorchNeuron, ``cpu`` with gloo otherwise (``trainium_trainer.native.device``); bf16 through ``torch.autocast``
(``--precision auto``: bf16 on neuron, fp32 on the CPU); ``--compile`` wraps the model in ``torch.compile``
with the device's backend, its cache under the job's compile cache (``trainium_trainer.native.compile_cache``). Nothing
here imports torch-xla: the native image has none.
"""

from __future__ import annotations

import argparse
import logging
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from trainium_trainer import boundary
from trainium_trainer.common.checkpoint import save_checkpoint
from trainium_trainer.common.device import Runtime
from trainium_trainer.mnist_mlp.train import (
    evaluate,
    finish,
    load_data,
    model_and_optimizer,
    resume,
    run_summary,
    shard_indices,
    train_metrics,
)
from trainium_trainer.native.compile_cache import configure_compile_cache, inductor_cache_counts
from trainium_trainer.native.device import CPU, init_device
from trainium_trainer.native.parallel import init_process_group

log = logging.getLogger("trainer")


def train(args: argparse.Namespace) -> dict[str, object]:
    device = init_device()  # no compilation yet: the cache directory is read at the first one
    # TorchNeuron's eager mode fills the same NEFF cache as torch.compile, so the cache is set either way
    cache = configure_compile_cache(device.type, args.compile_cache_uri)
    layout = init_process_group(device)
    # the XLA path's helpers take a Runtime: a non-XLA one makes their graph cuts and host copies no-ops
    runtime = Runtime(f"native-{device.type}", device.device)
    log.info("rank %d/%d on %s (%s)", layout.rank, layout.world_size, device.device, device.backend)
    torch.manual_seed(args.seed)

    features, targets, test_x, test_y = load_data(args.data_uri)
    model, optimizer = model_and_optimizer(features.shape[1], device.device, args)
    start_epoch, step = resume(model, optimizer, args)
    compiled = device.compile(model, args.compile)
    # DDP averages the gradients as the XLA path's all-reduce does (a one-device module: no device ids)
    ddp = DistributedDataParallel(compiled)
    params = list(model.parameters())

    metrics = train_metrics(args, layout, layout.is_main, len(targets), step, params)
    first_step, train_seconds, done = step, 0.0, False
    for epoch in range(start_epoch, args.epochs):
        t0 = time.perf_counter()
        for batch in shard_indices(len(targets), epoch, args.seed, layout, args.batch_size):
            index = torch.from_numpy(batch)
            x, y = features[index].to(device.device), targets[index].to(device.device)
            optimizer.zero_grad()
            with device.autocast(args.precision):
                loss = F.nll_loss(ddp(x), y)
            loss.backward()
            optimizer.step()
            step += 1
            if step % args.log_every == 0:
                metrics.train(step=step, epoch=epoch, loss=round(float(loss.detach().float().cpu()), 5), lr=args.lr)
            if args.max_steps and step >= args.max_steps:
                done = True
                break
        train_seconds += time.perf_counter() - t0
        if not args.compile_only and args.checkpoint_uri and layout.is_main:
            host = {"model": {k: v.cpu() for k, v in model.state_dict().items()},
                    "optimizer": _to_cpu(optimizer.state_dict()), "epoch": epoch, "step": step}  # fmt: skip
            save_checkpoint(args.checkpoint_uri, step, host)
        dist.barrier()
        if done:
            break

    with device.autocast(args.precision):
        accuracy = evaluate(compiled, test_x, test_y, runtime, args.eval_batch_size,
                            max_batches=2 if args.compile_only else 0)  # fmt: skip
    metrics.eval(step=step, accuracy=accuracy)
    metrics.close()
    summary: dict[str, object] = {
        **run_summary(args, metrics, runtime, layout.world_size, first_step, step, train_seconds, accuracy),
        "stack": boundary.STACK_NATIVE,
        "process_group_backend": device.backend,
        "precision": args.precision,
        "xla_compilations": 0,  # the XLA path's keys, kept so every reader of metrics.json reads both stacks
        "xla_cache_found": 0,
        "xla_cache_missing": 0,
        "compiled": bool(args.compile),
        **cache.summary(),
        "compile_cache": inductor_cache_counts() if args.compile and device.type == CPU else None,
    }
    finish(args, summary, metrics, model, runtime, layout.is_main)
    dist.barrier()  # every rank of the node has compiled: its mirror of a remote compile cache is complete
    cache.push()
    dist.destroy_process_group()
    return summary


def _to_cpu(value: object) -> object:
    """An optimizer state dict with every tensor on the host (the checkpoint is written there)."""
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_cpu(v) for v in value]
    return value
