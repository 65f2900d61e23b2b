"""A byte-level BPE tokenizer trained with the ``tokenizers`` library, stored as ``tokenizer.json``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainium_trainer.common import uri as uris

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]


def train_tokenizer(texts: Iterable[str], vocab_size: int = 512) -> Any:
    """Deterministic for the same texts in the same order."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts), trainer=trainer)
    return tokenizer


def load_tokenizer(uri: str) -> Any:
    """``uri`` is a ``tokenizer.json`` file or a directory holding one."""
    from tokenizers import Tokenizer

    target = uri if uri.endswith(".json") else uris.join(uri, "tokenizer.json")
    return Tokenizer.from_str(uris.read_bytes(target).decode())


def save_tokenizer(tokenizer: Any, uri: str) -> str:
    target = uri if uri.endswith(".json") else uris.join(uri, "tokenizer.json")
    uris.write_bytes(target, tokenizer.to_str().encode())
    return target


def special_id(tokenizer: Any, token: str) -> int:
    value = tokenizer.token_to_id(token)
    if value is None:
        raise ValueError(f"tokenizer has no {token!r} token")
    return int(value)
