"""A fine-tune on the native stack from a sharded Hugging Face directory (``save_pretrained`` in several
safetensors files): each rank reads only its shards of every tensor, and training starts from the base's
weights whether FSDP2 or DTensor tensor parallel splits them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from tests.hf_fixtures import save_tiny_llama
from tests.integration.native.test_llama_native import torchrun
from trainium_trainer.llama.data import prepare
from trainium_trainer.llama.train import DataOrder

BATCH = 4


@pytest.fixture(scope="module")
def base_and_data(tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("hf-in")
    base = root / "base"
    save_tiny_llama(base)
    prepare(str(root / "data"), synthetic_date="2026-01-01", tokenizer_uri=str(base / "tokenizer.json"))
    return base, str(root / "data")


def base_first_loss(base: Path, data_uri: str, data_ranks: int) -> float:
    """The base model's mean loss on step 0's batches of every data-parallel rank."""
    import numpy as np
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base).eval()
    train = torch.from_numpy(np.concatenate([np.load(p) for p in sorted((Path(data_uri) / "train").glob("*.npy"))]))
    with torch.no_grad():
        losses = [float(model(input_ids=train[rows], labels=train[rows]).loss)
                  for rows in (DataOrder(len(train), BATCH, rank, data_ranks, 0).batch(0)
                               for rank in range(data_ranks))]  # fmt: skip
    return sum(losses) / data_ranks


def rank0_share(base: Path, tp: int) -> float:
    """Rank 0's share of the base's elements on 2 ranks: with FSDP2 (``tp=1``) the first ``ceil(rows/2)`` rows
    of every tensor; with tensor parallel (``tp=2``, FSDP2 over one rank) half of each q/k/v/o and MLP
    projection and all of the rest."""
    from safetensors import safe_open

    mine = total = 0
    for file in base.glob("*.safetensors"):
        with safe_open(str(file), framework="pt") as shard:
            for name in shard.keys():  # noqa: SIM118 (a safe_open handle is not iterable)
                shape = shard.get_slice(name).get_shape()
                size = math.prod(shape)
                total += size
                if tp == 1:
                    mine += math.ceil(shape[0] / 2) * size // shape[0]
                else:
                    mine += size // 2 if name.endswith("_proj.weight") else size
    return mine / total


@pytest.mark.parametrize("tp", [1, 2], ids=["fsdp2", "tensor-parallel"])
def test_each_rank_reads_its_shards_and_training_starts_from_the_base(tmp_path, base_and_data, tp):
    base, data_uri = base_and_data
    assert len(list(base.glob("model-*.safetensors"))) > 2
    out = tmp_path / "tuned"
    torchrun(2, "--data-uri", data_uri, "--max-steps", "1", "--log-every", "1", "--batch-size", str(BATCH),
             "--output-uri", str(out), "--base-model-uri", base.as_uri(),
             "--tensor-parallel-size", str(tp))  # fmt: skip
    summary = json.loads((out / "metrics.json").read_text())
    # rank 0 read its shard of each tensor and nothing more, not a whole copy of the model
    assert summary["base_read_fraction"] == pytest.approx(rank0_share(base, tp), abs=1e-6)
    assert summary["base_model"]["files"] >= 3
    data_ranks = 2 // tp
    first = base_first_loss(base, data_uri, data_ranks)
    assert summary["history"][0]["loss"] == pytest.approx(first, abs=1e-4)


def test_a_base_that_does_not_fit_the_model_is_refused_by_name(tmp_path, base_and_data):
    base, data_uri = base_and_data
    broken = tmp_path / "broken"
    save_tiny_llama(broken)
    config = json.loads((broken / "config.json").read_text())
    config["intermediate_size"] = 96  # the weights say 128
    (broken / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out"
    with pytest.raises(AssertionError, match=r"base weight model\.layers\.\d+\.mlp\.\w+_proj\.weight .* has shape"):
        torchrun(2, "--data-uri", data_uri, "--max-steps", "1", "--batch-size", str(BATCH),
                 "--output-uri", str(out), "--base-model-uri", broken.as_uri())  # fmt: skip


def test_a_tied_base_with_llama3_rope_scaling_fine_tunes_from_its_weights(tmp_path, base_and_data):
    """Llama 3.2's form: one embedding matrix shared with the LM head (absent from the files) and ``llama3``
    RoPE scaling, whose frequencies the meta-initialized model recomputes from the config."""
    _, data_uri = base_and_data
    base = tmp_path / "tied"
    rope = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64}  # fmt: skip
    state = save_tiny_llama(base, tie_word_embeddings=True, rope_scaling=rope, rope_theta=500000.0)
    assert "lm_head.weight" in state
    out = tmp_path / "tuned"
    torchrun(2, "--data-uri", data_uri, "--max-steps", "1", "--log-every", "1", "--batch-size", str(BATCH),
             "--output-uri", str(out), "--base-model-uri", base.as_uri())  # fmt: skip
    summary = json.loads((out / "metrics.json").read_text())
    assert summary["history"][0]["loss"] == pytest.approx(base_first_loss(base, data_uri, 2), abs=1e-4)
