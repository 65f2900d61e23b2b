"""The Llama data tests' tokenizer: trained here, on a synthetic day's records, as the data job trains one."""

from __future__ import annotations

from pathlib import Path

from trainium_trainer.llama.data import prepare


def trained_tokenizer(root: Path, records: int) -> str:
    """A new tokenizer trained by a data job on ``records`` synthetic records of 2026-01-01, under ``root``;
    its URI. A module trains one and shares it (``scope="module"``): training is the slow part."""
    prepare(str(root / "seed"), synthetic_date="2026-01-01", tokenizer_uri=str(root / "tokenizer.json"),
            train_new_tokenizer=True, synthetic_records=records)  # fmt: skip
    return str(root / "tokenizer.json")
