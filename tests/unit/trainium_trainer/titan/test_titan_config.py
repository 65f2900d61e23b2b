"""The TorchTitan job config we generate, read by TorchTitan's own parser; our flavours' shapes in TorchTitan's
model; its checkpoint converted to a Hugging Face model that computes what TorchTitan's model does."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torchtitan")  # the native venv's; the main venv never collects this folder

import torch  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402

from trainium_trainer.titan import config, convert, spec  # noqa: E402

RUN = config.TitanRun(flavor="tiny", dump_folder="/tmp/titan-dump", checkpoint_folder="/tmp/titan-ckpt", steps=12,
                      batch_size=4, seq_len=64, dp_shard=2, tp=1, seed=7, lr=1e-3, log_every=3,
                      checkpoint_every=6)  # fmt: skip


def test_the_generated_config_is_what_torchtitans_parser_reads(tmp_path):
    job = config.parse(config.write(RUN, tmp_path / "job.toml"))
    assert (job.model.name, job.model.flavor) == (spec.SPEC_NAME, "tiny")
    assert (job.training.steps, job.training.local_batch_size, job.training.seq_len) == (12, 4, 64)
    assert (job.parallelism.data_parallel_shard_degree, job.parallelism.tensor_parallel_degree) == (2, 1)
    assert job.debug.seed == 7 and job.optimizer.lr == 1e-3 and job.metrics.log_freq == 3
    assert job.checkpoint.enable and job.checkpoint.folder == "/tmp/titan-ckpt" and job.checkpoint.interval == 6
    assert job.checkpoint.last_save_model_only and job.checkpoint.initial_load_path is None
    assert job.lr_scheduler.warmup_steps == 5 and job.activation_checkpoint.mode == "none"


def test_a_base_model_is_torchtitans_initial_load_from_hugging_face(tmp_path):
    run = dataclasses.replace(RUN, base_model_dir="/models/base", warmup_steps=50)
    job = config.parse(config.write(run, tmp_path / "job.toml"))
    assert job.checkpoint.initial_load_path == "/models/base" and job.checkpoint.initial_load_in_hf
    assert job.lr_scheduler.warmup_steps == 11  # TorchTitan needs warmup < steps


def test_torchtitans_parser_refuses_a_key_it_does_not_know(tmp_path):
    """So the first test means something: a key outside TorchTitan's JobConfig does not pass."""
    path = config.write(RUN, tmp_path / "job.toml")
    path.write_text(path.read_text().replace("[training]\n", "[training]\nno_such_key = 1\n"))
    with pytest.raises((ValueError, TypeError, SystemExit)):
        config.parse(path)


@pytest.mark.parametrize("bad", [{"steps": 0}, {"batch_size": 0}, {"seq_len": 1}])
def test_an_impossible_run_is_refused_before_torchtitan_sees_it(bad):
    with pytest.raises(ValueError, match="must be positive"):
        config.job_config(dataclasses.replace(RUN, **bad))


@pytest.mark.parametrize("preset", ["tiny", "small", "llama-1b", "llama2-7b"])
def test_each_preset_has_its_shapes_in_torchtitans_llama3(preset):
    from torchtitan.models.llama3 import Transformer

    from trainium_trainer.llama.presets import get_preset

    p, args = get_preset(preset), spec.preset_args(preset, 512)
    with torch.device("meta"):
        model = Transformer(args)
    layer = model.layers["0"]
    assert layer.feed_forward.w1.weight.shape == (p.intermediate_size, p.hidden_size)
    assert layer.attention.wk.weight.shape[0] == p.num_key_value_heads * p.hidden_size // p.num_attention_heads
    assert len(model.layers) == p.num_hidden_layers and model.output.weight.shape[0] == (p.vocab_size or 512)


def test_an_intermediate_size_off_the_power_of_two_grid_gets_an_exact_multiplier():
    multiple, multiplier = spec.ffn_shape(4096, 14336)  # Llama 3 8B
    assert spec.ffn_dim(4096, multiple, multiplier) == 14336


def _titan_model(args, seed: int):
    from torchtitan.models.llama3 import Transformer

    torch.manual_seed(seed)
    model = Transformer(args)
    with torch.no_grad():
        model.init_weights()
    for p in model.parameters():  # TorchTitan's init leaves the norms at 1 and the output small: perturb all
        p.data.add_(torch.randn_like(p) * 0.02)
    return model.eval()


@pytest.mark.parametrize("flavor", ["debugmodel", "tiny"])
def test_the_hugging_face_export_of_a_checkpoint_computes_what_torchtitans_model_does(tmp_path, flavor):
    """Names, the q/k RoPE permutation and RoPE scaling (debugmodel scales, our presets do not) all matter."""
    from transformers import AutoModelForCausalLM

    args = spec.flavor_args(flavor, 96)
    args = dataclasses.replace(args, n_layers=2, max_seq_len=32)
    titan = _titan_model(args, seed=3)
    step_dir = tmp_path / "checkpoint" / "step-5"
    dcp.save({k: v for k, v in titan.state_dict().items()}, checkpoint_id=str(step_dir))
    convert.to_hugging_face(str(step_dir), args, str(tmp_path / "hf"))
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    tokens = torch.from_numpy(np.random.default_rng(0).integers(0, 96, size=(2, 32)))
    with torch.no_grad():
        torch.testing.assert_close(hf(input_ids=tokens).logits, titan(tokens), rtol=1e-4, atol=1e-4)
    assert convert.checkpoint_steps(str(tmp_path / "checkpoint")) == [5]


def test_the_loader_feeds_whole_blocks_and_ignores_the_last_label(tmp_path):
    from trainium_trainer.llama.train import DataOrder

    data = _blocks(tmp_path, n=12, block=8)
    loader = spec.BlocksDataLoader(str(data), batch_size=2, dp_rank=1, dp_world_size=2, seed=4)
    batches = iter(loader)
    inputs, labels = next(batches)
    expected = torch.from_numpy(np.load(data / "train" / "shard-00000.npy")[DataOrder(12, 2, 1, 2, 4).batch(0)])
    assert torch.equal(inputs["input"], expected.long())
    assert torch.equal(labels[:, :-1], expected[:, 1:].long()) and bool((labels[:, -1] == spec.IGNORE_INDEX).all())
    next(batches)
    resumed = spec.BlocksDataLoader(str(data), batch_size=2, dp_rank=1, dp_world_size=2, seed=4)
    resumed.load_state_dict(loader.state_dict())
    assert torch.equal(next(iter(resumed))[0]["input"], next(batches)[0]["input"])


def _blocks(root: Path, n: int, block: int) -> Path:
    import hashlib
    import json

    data = root / "data"
    (data / "train").mkdir(parents=True)
    shard = data / "train" / "shard-00000.npy"
    np.save(shard, np.arange(n * block, dtype=np.int32).reshape(n, block) % 50)
    digest = hashlib.sha256(shard.read_bytes()).hexdigest()
    index = {"block_size": block, "vocab_size": 50, "skipped": False,
             "train": [{"file": "train/shard-00000.npy", "blocks": n, "sha256": digest}], "eval": []}  # fmt: skip
    (data / "index.json").write_text(json.dumps(index))
    return data
