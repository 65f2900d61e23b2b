"""A TorchTitan checkpoint converted to a Hugging Face model that computes what TorchTitan's model does."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torchtitan")  # the native venv's; the main venv never collects this folder

import torch  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402

from trainium_trainer.titan import convert, spec  # noqa: E402


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
