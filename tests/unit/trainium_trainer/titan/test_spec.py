"""Our flavours' shapes in TorchTitan's model, and the data loader TorchTitan trains from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torchtitan")  # the native venv's; the main venv never collects this folder

import torch  # noqa: E402

from trainium_trainer.titan import spec  # noqa: E402


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
