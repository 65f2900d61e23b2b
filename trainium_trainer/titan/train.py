"""``python -m trainium_trainer.titan.train``: TorchTitan's own trainer on the run's params, inside our job contract.

Per rank: the job config TOML is generated from the arguments (``trainium_trainer.titan.config``) into
``<output>/titan/job_config.toml``, read back with TorchTitan's ``ConfigManager`` and run by TorchTitan's
``Trainer`` (``torchtitan.train``) over our spec (``trainium_trainer.titan.spec``: our flavours, the data job's blocks).
Around it: the live stream and ``metrics.json`` as the native trainer writes them (a train record per logged
step, from the losses TorchTitan's trainer logs), then rank 0 converts TorchTitan's last DCP checkpoint to a
Hugging Face directory at the output and evaluates it. A rerun resumes from TorchTitan's newest checkpoint, also
on a fresh instance when the checkpoints are on S3 (mirrored on each node, ``common/mirror.py``).

    torchrun --nproc-per-node 2 -m trainium_trainer.titan.train --data-uri D --output-uri O --max-steps 20
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainium_trainer import boundary
from trainium_trainer.common import lean_exit, mirror
from trainium_trainer.common import uri as uris
from trainium_trainer.common.errors import BadInputError, job_main
from trainium_trainer.common.inputs import check_input
from trainium_trainer.common.stream import add_stream_args

log = logging.getLogger("trainer")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from trainium_trainer.llama.train import add_lm_args
    from trainium_trainer.titan.spec import DEBUG_FLAVOR, FLAVORS

    env = os.environ.get
    p = argparse.ArgumentParser(prog="trainium_trainer.titan.train", description=__doc__.splitlines()[0])
    p.add_argument("--data-uri", required=True, help="the data job's output (index.json, train/*.npy)")
    p.add_argument("--output-uri", default=env(boundary.ENV_OUTPUT_URI))
    p.add_argument(
        "--checkpoint-uri",
        default=env(boundary.ENV_CHECKPOINT_URI),
        help="TorchTitan's DCP checkpoints: a folder, or s3:// mirrored per node (default <output>/titan/checkpoint)",
    )
    p.add_argument("--flavor", "--preset", dest="flavor", default=DEBUG_FLAVOR, choices=FLAVORS)
    add_lm_args(p)  # the XLA trainer's: TorchTitan's job config is generated from the same settings
    p.add_argument("--tensor-parallel-size", type=int, default=int(env(boundary.ENV_TENSOR_PARALLEL_SIZE, "1")))
    p.add_argument(
        "--base-model-uri",
        default=None,
        help="a local Hugging Face Llama directory to start from (TorchTitan's initial_load_in_hf)",
    )
    add_stream_args(p)
    p.add_argument("--max-shard-bytes", type=int, default=None)
    args = p.parse_args(argv)
    if not args.output_uri:
        p.error(f"--output-uri (or {boundary.ENV_OUTPUT_URI}) is required")
    return args


def local_folder(uri: str | None, what: str) -> str | None:
    """TorchTitan reads its base model with plain file I/O: a ``file://`` URI or a path only."""
    if not uri:
        return None
    path = uris.local_path(uri)
    if path is None:
        raise BadInputError(f"{what} {uri!r}: TorchTitan reads local folders only (file:// or a path)")
    return str(Path(path).resolve())


def checkpoint_folder(uri: str | None, default: Path) -> tuple[str, str | None]:
    """TorchTitan's checkpoint folder (its checkpointer does plain file I/O) and the remote folder it mirrors:
    an ``s3://`` ``--checkpoint-uri`` (every ECS/Batch job's) is pulled into a node-local mirror before training
    and each checkpoint pushed back as it is saved, so a retry on a fresh instance resumes from the last one."""
    if not uri:
        return str(default), None
    path = uris.local_path(uri)
    if path is not None:
        return str(Path(path).resolve()), None
    folder = mirror.mirror_directory(uri, "titan-checkpoint")
    held = mirror.pull(uri, folder)
    log.info("checkpoints: %s mirrored at %s (%d file(s))", uri, folder, held)
    return folder, uri


def config_file(dump: Path, node: int) -> Path:
    """The job config file of node ``node``: each node's names its own checkpoint mirror, and local compute runs a
    job's nodes on one machine with one output folder, so a node other than 0 has a file of its own."""
    return dump / ("job_config.toml" if node == 0 else f"job_config.node{node}.toml")


def write_config(path: Path, text: str) -> None:
    """Every rank of a node writes the same file; write-then-rename so none reads a half-written one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".job_config.")
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def trainer_class(metrics: Any, saved: Callable[[], object] = lambda: None) -> type:
    """TorchTitan's ``Trainer`` with its logged losses copied into our stream, its steps timed, and ``saved``
    called on every rank after each checkpoint it saves (DCP's save returns once every rank has written)."""
    from torchtitan.train import Trainer

    class TitanTrainer(Trainer):
        first_start: float | None = None
        last_end: float | None = None
        steps_run = 0
        last_loss = float("nan")

        def __init__(self, job_config: Any) -> None:
            super().__init__(job_config)
            log_step = self.metrics_processor.log

            def log_and_stream(step: int, global_avg_loss: Any, global_max_loss: Any, grad_norm: float,
                               extra_metrics: dict[str, Any] | None = None) -> None:  # fmt: skip
                log_step(step, global_avg_loss, global_max_loss, grad_norm, extra_metrics=extra_metrics)
                self.last_loss = float(global_avg_loss)
                metrics.train(step=step, epoch=self.dataloader.order.position(step - 1)[0], loss=self.last_loss,
                              lr=float((extra_metrics or {}).get("lr", float("nan"))))  # fmt: skip

            self.metrics_processor.log = log_and_stream
            save = self.checkpointer.save

            def save_and_report(curr_step: int, last_step: bool = False) -> None:
                save(curr_step, last_step=last_step)
                saved()

            self.checkpointer.save = save_and_report

        def train_step(self, data_iterator: Any) -> None:
            started = time.perf_counter()
            self.first_start = self.first_start or started
            super().train_step(data_iterator)
            self.last_end = time.perf_counter()
            self.steps_run += 1

    return TitanTrainer


def evaluate(model_dir: str, data_uri: str, batch_size: int, max_batches: int) -> float:
    """Mean next-token loss of the exported model over the held-out blocks (train blocks when none)."""
    import torch
    from transformers import AutoModelForCausalLM

    from trainium_trainer.llama.data import load_blocks

    blocks = load_blocks(data_uri, "eval")
    if not len(blocks):
        blocks = load_blocks(data_uri, "train")[:batch_size]
    model = AutoModelForCausalLM.from_pretrained(uris.local_path(model_dir) or model_dir).eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for b, start in enumerate(range(0, len(blocks), batch_size)):
            if max_batches and b >= max_batches:
                break
            x = torch.from_numpy(blocks[start : start + batch_size]).long()
            logits = model(input_ids=x).logits.float()
            total += float(torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                             x[:, 1:].reshape(-1), reduction="sum"))  # fmt: skip
            count += x[:, 1:].numel()
    return total / count if count else float("nan")


def train(args: argparse.Namespace) -> dict[str, Any]:
    from trainium_trainer.titan.device import use_cpu_when_no_accelerator

    device_type = use_cpu_when_no_accelerator()  # before torchtitan.train is imported
    import torch.distributed as dist
    from torchtitan.tools.logging import init_logger

    from trainium_trainer.common.metrics import TrainMetrics, finished_summary, mark_done
    from trainium_trainer.common.stream import job_peak_flops
    from trainium_trainer.llama.data import read_index
    from trainium_trainer.llama.hf_export import write_tokenizer
    from trainium_trainer.llama.presets import flops_per_token
    from trainium_trainer.llama.train import lm_summary
    from trainium_trainer.titan import config as titan_config
    from trainium_trainer.titan import convert, spec

    done = finished_summary(args.output_uri)
    if done is not None:
        return done
    world_size, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    if world_size % args.tensor_parallel_size:
        raise BadInputError(f"--tensor-parallel-size {args.tensor_parallel_size} does not divide the "
                            f"{world_size} ranks")  # fmt: skip
    dp = world_size // args.tensor_parallel_size
    index = read_index(args.data_uri)
    vocab_size, block_size = int(index["vocab_size"]), int(index["block_size"])
    local_output = uris.local_path(args.output_uri)
    dump = Path(local_output) / "titan" if local_output else Path(tempfile.gettempdir()) / "trainium-titan"
    checkpoints, remote_checkpoints = checkpoint_folder(args.checkpoint_uri, dump / "checkpoint")
    base_dir = local_folder(args.base_model_uri, "--base-model-uri")
    run = titan_config.TitanRun(
        flavor=args.flavor, dump_folder=str(dump), checkpoint_folder=checkpoints, steps=args.max_steps,
        batch_size=args.batch_size, seq_len=block_size, dp_shard=dp, tp=args.tensor_parallel_size,
        seed=args.seed, lr=args.lr, weight_decay=args.weight_decay, warmup_steps=args.warmup_steps,
        min_lr_ratio=args.min_lr_ratio, max_grad_norm=args.max_grad_norm, log_every=args.log_every,
        checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints, base_model_dir=base_dir,
    )  # fmt: skip
    config_path = config_file(dump, mirror.node_index())
    write_config(config_path, titan_config.to_toml(titan_config.job_config(run)))
    spec.register(args.data_uri, args.flavor, vocab_size, args.seed)
    job = titan_config.parse(config_path)
    model_args = spec.flavor_args(args.flavor, vocab_size)
    model_args.update_from_config(job)

    hf = convert.hf_config(model_args)
    start = max(convert.checkpoint_steps(checkpoints), default=0)
    tokens_per_step = args.batch_size * run.seq_len * dp
    metrics = TrainMetrics(args.output_uri, enabled=rank == 0, total_steps=args.max_steps, start_step=start,
                           items_per_step=tokens_per_step, unit="tokens",
                           flops_per_item=flops_per_token(hf, run.seq_len), peak_flops=job_peak_flops(world_size),
                           every_s=args.stream_every_s, progress_every_s=args.progress_every_s)  # fmt: skip
    init_logger()

    def push_checkpoints() -> None:
        if remote_checkpoints:
            mirror.push(checkpoints, remote_checkpoints)

    titan = trainer_class(metrics, push_checkpoints)(job)
    try:
        titan.train()
    finally:
        titan.close()
    seconds = (titan.last_end - titan.first_start) if titan.steps_run and titan.first_start else 0.0
    tokens_per_s = titan.steps_run * tokens_per_step / seconds if seconds else 0.0
    final_step = titan.step
    dist.barrier()
    if dist.is_initialized():
        dist.destroy_process_group()
    if rank != 0:
        metrics.close()
        return {"steps": final_step}

    if remote_checkpoints:  # every node pushed its shards before the barrier: gather them all for the export
        mirror.pull(remote_checkpoints, checkpoints)
    step_dir = str(Path(checkpoints) / f"step-{final_step}")
    convert.to_hugging_face(step_dir, model_args, args.output_uri, args.max_shard_bytes)
    write_tokenizer(args.output_uri, args.data_uri, None, hf.max_position_embeddings)
    eval_loss = evaluate(args.output_uri, args.data_uri, args.batch_size, args.eval_batches)
    metrics.eval(step=final_step, loss=eval_loss)
    parameters = sum(int(t.numel()) for t in convert.read_model_state(step_dir).values())
    summary: dict[str, Any] = {
        "trainer": "torchtitan",
        "torchtitan_version": _version("torchtitan"),
        "runtime": device_type,
        "stack": boundary.STACK_NATIVE,
        "process_group_backend": "gloo" if device_type == "cpu" else device_type,
        "world_size": world_size,
        "data_parallel_size": dp,
        "tensor_parallel_size": args.tensor_parallel_size,
        **lm_summary(metrics, args.flavor, parameters, run.seq_len, args.batch_size, final_step, start or None,
                     titan.last_loss, eval_loss, tokens_per_s),
        "job_config": str(config_path),
        "checkpoint": step_dir,
        "data_uri": args.data_uri,
    }  # fmt: skip
    log.info("summary %s", json.dumps(summary, sort_keys=True))
    metrics.finish(summary)
    mark_done(args.output_uri)
    return summary


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


@job_main
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    check_input("--base-model-uri", args.base_model_uri)
    check_input("--data-uri", args.data_uri)
    train(args)


if __name__ == "__main__":
    lean_exit.run(main)
