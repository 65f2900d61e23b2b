"""The Llama 3 presets are Meta's released shapes: the parameter counts of the published checkpoints."""

from __future__ import annotations

import pytest
import torch

from trainium_trainer.llama.presets import PRESETS, llama_config

#: Exact parameter counts of meta-llama/Meta-Llama-3-8B, Meta-Llama-3-70B and Llama-3.2-1B (the sum of their
#: safetensors shapes; "8.03B", "70.6B" and "1.24B" on their model pages).
PUBLISHED = {"llama3-8b": 8_030_261_248, "llama3-70b": 70_553_706_496, "llama3.2-1b": 1_235_814_400}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
@pytest.mark.model
def test_llama3_presets_have_the_published_parameter_counts(name):
    from transformers import LlamaForCausalLM

    with torch.device("meta"):
        model = LlamaForCausalLM(llama_config(name, vocab_size=32000))  # the preset's own vocabulary wins
    assert sum(p.numel() for p in model.parameters()) == PUBLISHED[name]


def test_llama32_keeps_its_tied_embeddings_and_rope_scaling():
    config = llama_config("llama3.2-1b", 32000)
    assert config.tie_word_embeddings and config.rope_theta == 500000.0
    assert config.rope_scaling["rope_type"] == "llama3" and config.rope_scaling["factor"] == 32.0
    assert "rope_scaling" not in PRESETS["tiny"].config_dict(64)


def test_the_dag_offers_exactly_the_trainers_presets():
    import ast
    from pathlib import Path

    dag = Path(__file__).resolve().parents[4] / "dags" / "trainium_llama_pretrain.py"
    (listed,) = [ast.literal_eval(node.value) for node in ast.parse(dag.read_text()).body
                 if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PRESETS"]  # fmt: skip
    assert listed == list(PRESETS)
