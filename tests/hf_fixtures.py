"""A tiny Llama saved by transformers' ``save_pretrained`` in several shards, with a tokenizer, and a spy
that counts what safetensors reads."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import safetensors
import torch

from trainium_trainer.llama.corpus import synthetic_jsonl
from trainium_trainer.llama.tokenizer import BOS, EOS, PAD, UNK, train_tokenizer

SHARD_SIZE = "40KB"  # ~230 k parameters in fp32: several shards


def corpus_texts() -> list[str]:
    lines = synthetic_jsonl("2026-01-01", 200).decode().splitlines()
    return [" ".join(str(v) for v in json.loads(line).values()) for line in lines if line.strip()]


def save_tiny_llama(folder: Path, seed: int = 3, **overrides) -> dict[str, torch.Tensor]:
    """Writes config, shards + index and tokenizer files; returns the model's state dict."""
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = train_tokenizer(corpus_texts(), vocab_size=512)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=BOS, eos_token=EOS, unk_token=UNK,
                                   pad_token=PAD)  # fmt: skip
    fast.save_pretrained(folder)
    values = dict(vocab_size=tokenizer.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  tie_word_embeddings=False)  # fmt: skip
    values.update(overrides)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**values))
    model.save_pretrained(folder, max_shard_size=SHARD_SIZE)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class ReadSpy:
    """Wraps ``safetensors.safe_open``: counts files opened and tensors (or slices) read, and which."""

    def __init__(self) -> None:
        self.opened: Counter[str] = Counter()
        self.tensors: Counter[str] = Counter()
        self.slices: dict[str, list[tuple]] = {}
        self._real = safetensors.safe_open

    def install(self, monkeypatch) -> ReadSpy:
        spy = self

        class Opened:
            def __init__(self, path, framework, device="cpu"):
                spy.opened[Path(path).name] += 1
                self._inner = spy._real(path, framework=framework, device=device)

            def __enter__(self):
                self._inner.__enter__()
                return self

            def __exit__(self, *exc):
                return self._inner.__exit__(*exc)

            def keys(self):
                return self._inner.keys()

            def get_tensor(self, name):
                spy.tensors[name] += 1
                return self._inner.get_tensor(name)

            def get_slice(self, name):
                spy.tensors[name] += 1
                inner = self._inner.get_slice(name)

                class Sliced:
                    def get_shape(self):
                        return inner.get_shape()

                    def __getitem__(self, index):
                        spy.slices.setdefault(name, []).append(index)
                        return inner[index]

                return Sliced()

        monkeypatch.setattr(safetensors, "safe_open", Opened)
        return self
