"""Model size presets and the FLOPs a token costs, for MFU.

``tiny`` trains in about a minute on two CPU cores; ``llama2-7b`` is the published Trn1 reference shape. The
Llama 3 shapes are Meta's released configs (``config.json`` of meta-llama/Meta-Llama-3-8B, Meta-Llama-3-70B and
Llama-3.2-1B on the Hugging Face Hub; the Llama 3 paper, Table 3): grouped-query attention with 8 key/value
heads, a 128256-token vocabulary and RoPE base 500000, and Llama 3.2 1B's tied embeddings and ``llama3`` RoPE
scaling. TorchTitan's ``llama3`` flavours ``8B`` and ``70B`` are the same shapes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import LlamaConfig


@dataclass(frozen=True)
class Preset:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int
    vocab_size: int | None = None  # None: the tokenizer's vocabulary
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False
    rope_scaling: dict[str, Any] | None = None

    def config_dict(self, vocab_size: int) -> dict[str, Any]:
        values = asdict(self)
        values["vocab_size"] = self.vocab_size or vocab_size
        if values["rope_scaling"] is None:
            del values["rope_scaling"]
        return values


#: Llama 3.1/3.2's frequency scaling for long contexts (their config.json ``rope_scaling``).
LLAMA32_ROPE = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}  # fmt: skip
LLAMA3_VOCAB = 128256


PRESETS: dict[str, Preset] = {
    "tiny": Preset(64, 176, 2, 4, 4, 256),
    "small": Preset(256, 688, 4, 8, 8, 1024),
    "llama-1b": Preset(2048, 5632, 22, 32, 4, 4096),
    "llama2-7b": Preset(4096, 11008, 32, 32, 32, 4096, vocab_size=32000),
    "llama2-13b": Preset(5120, 13824, 40, 40, 40, 4096, vocab_size=32000),
    "llama3.2-1b": Preset(
        2048,
        8192,
        16,
        32,
        8,
        131072,
        vocab_size=LLAMA3_VOCAB,
        rope_theta=500000.0,
        tie_word_embeddings=True,
        rope_scaling=LLAMA32_ROPE,
    ),
    "llama3-8b": Preset(4096, 14336, 32, 32, 8, 8192, vocab_size=LLAMA3_VOCAB, rope_theta=500000.0),
    "llama3-70b": Preset(8192, 28672, 80, 64, 8, 8192, vocab_size=LLAMA3_VOCAB, rope_theta=500000.0),
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"preset {name!r} is not one of: {', '.join(PRESETS)}") from None


def llama_config(preset: str | Preset, vocab_size: int, **overrides: Any) -> LlamaConfig:
    """A transformers ``LlamaConfig`` for the preset (imported here: DAG files never load transformers)."""
    from transformers import LlamaConfig

    values = (get_preset(preset) if isinstance(preset, str) else preset).config_dict(vocab_size)
    values.update(overrides)
    values.setdefault("tie_word_embeddings", False)
    values.setdefault("attention_dropout", 0.0)
    return LlamaConfig(**values)


def flops_per_token(config: Any, seq_len: int) -> float:
    """Training FLOPs per token: 6 x non-embedding parameters + the attention score/value matmuls.

    The usual estimate (forward 2 FLOPs per weight per token, backward twice that), with
    ``12 * layers * hidden * seq_len`` for attention over the sequence.
    """
    h: int = config.hidden_size
    layers: int = config.num_hidden_layers
    inter: int = config.intermediate_size
    kv: int = h * config.num_key_value_heads // config.num_attention_heads
    per_layer = h * h * 2 + h * kv * 2 + 3 * h * inter  # q, o, k, v, gate/up/down
    params: int = layers * per_layer + h * config.vocab_size  # lm_head counts; the embedding lookup does not
    return 6.0 * params + 12.0 * layers * h * seq_len
