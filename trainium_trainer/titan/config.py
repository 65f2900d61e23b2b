"""The TorchTitan job config (its TOML) for a run's params: what ``torchtitan.train --job.config_file`` reads.

Only sections and keys of TorchTitan's ``JobConfig`` appear; :func:`parse` reads the file back with
TorchTitan's own ``ConfigManager``, which refuses an unknown key, so a config this module writes is one
TorchTitan accepts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainium_trainer.titan.spec import SPEC_NAME


@dataclass(frozen=True)
class TitanRun:
    """The params of one run, in our trainer's terms."""

    flavor: str
    dump_folder: str
    checkpoint_folder: str
    steps: int
    batch_size: int
    seq_len: int
    dp_shard: int = -1
    tp: int = 1
    seed: int = 0
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup_steps: int = 5
    min_lr_ratio: float = 0.1
    max_grad_norm: float = 1.0
    log_every: int = 10
    checkpoint_every: int = 0
    keep_checkpoints: int = 2
    base_model_dir: str | None = None
    description: str = "trainium titan run"


def job_config(run: TitanRun) -> dict[str, dict[str, Any]]:
    """TorchTitan's config sections for ``run``: our spec and flavour, fp32 on the CPU (bf16 FSDP params only
    where TorchTitan's mixed precision applies), our schedule, and a DCP checkpoint at the end at least."""
    if run.steps < 1 or run.batch_size < 1 or run.seq_len < 2:
        raise ValueError(f"steps, batch size and seq len must be positive (got {run})")
    checkpoint: dict[str, Any] = {
        "enable": True,
        "folder": run.checkpoint_folder,
        "interval": run.checkpoint_every or run.steps,
        "keep_latest_k": max(run.keep_checkpoints, 2) if run.keep_checkpoints > 0 else 0,
        "last_save_model_only": True,
        "export_dtype": "float32",
    }
    if run.base_model_dir:
        checkpoint |= {"initial_load_path": run.base_model_dir, "initial_load_in_hf": True,
                       "initial_load_model_only": True}  # fmt: skip
    warmup = min(run.warmup_steps, run.steps - 1)
    return {
        "job": {"dump_folder": run.dump_folder, "description": run.description},
        "model": {"name": SPEC_NAME, "flavor": run.flavor},
        "optimizer": {"name": "AdamW", "lr": run.lr, "eps": 1e-8, "weight_decay": run.weight_decay,
                      "implementation": "for-loop"},  # fmt: skip
        "lr_scheduler": {"warmup_steps": warmup, "decay_type": "cosine", "min_lr_factor": run.min_lr_ratio},
        "training": {"local_batch_size": run.batch_size, "seq_len": run.seq_len, "steps": run.steps,
                     "max_norm": run.max_grad_norm, "dtype": "float32", "mixed_precision_param": "float32"},
        "parallelism": {"data_parallel_shard_degree": run.dp_shard, "tensor_parallel_degree": run.tp,
                        "data_parallel_replicate_degree": 1, "disable_loss_parallel": True},
        "checkpoint": checkpoint,
        "activation_checkpoint": {"mode": "none"},
        "metrics": {"log_freq": run.log_every, "enable_tensorboard": False, "disable_color_printing": True},
        "debug": {"seed": run.seed, "deterministic": True},
        "comm": {"init_timeout_seconds": 300, "train_timeout_seconds": 300},
    }  # fmt: skip


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"{type(value).__name__} has no TOML form here")


def to_toml(config: dict[str, dict[str, Any]]) -> str:
    """One ``[section]`` of scalars per TorchTitan config group."""
    lines: list[str] = []
    for section, values in config.items():
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {_value(value)}" for key, value in values.items())
        lines.append("")
    return "\n".join(lines)


def write(run: TitanRun, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_toml(job_config(run)))
    return path


def parse(path: Path, *overrides: str) -> Any:
    """The file through TorchTitan's own parser (``ConfigManager``), as ``torchtitan.train`` reads it."""
    from torchtitan.config import ConfigManager

    return ConfigManager().parse_args(["--job.config_file", str(path), *overrides])
