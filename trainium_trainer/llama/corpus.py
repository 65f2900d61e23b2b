"""A small synthetic instruction corpus, one per data interval, seeded by the interval's date.

Real fine-tuning data arrives per day; for the demo and the tests each day gets its own records drawn
from a few learnable task families (arithmetic, word order, counting, lookups), so a tiny model's loss
visibly drops and two runs for the same day produce byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import random

COLORS = ["red", "green", "blue", "yellow", "purple", "orange", "white", "black"]
FRUITS = {"apple": "red", "banana": "yellow", "lime": "green", "plum": "purple", "orange": "orange"}
ANIMALS = ["cat", "dog", "owl", "fox", "bee", "cow", "hen", "yak"]


def seed_for(date: str, salt: str = "") -> int:
    """A stable 64-bit seed from an ISO date (``2026-01-05``) and an optional salt."""
    return int.from_bytes(hashlib.sha256(f"{date}|{salt}".encode()).digest()[:8], "big")


def _record(rng: random.Random) -> dict[str, str]:
    kind = rng.randrange(5)
    if kind == 0:
        a, b = rng.randrange(50), rng.randrange(50)
        return {"instruction": f"Add {a} and {b}.", "response": f"{a} plus {b} is {a + b}."}
    if kind == 1:
        words = rng.sample(COLORS, 3)
        return {"instruction": "Reverse the words: " + " ".join(words), "response": " ".join(reversed(words))}
    if kind == 2:
        word = rng.choice(ANIMALS + list(FRUITS))
        return {"instruction": f"How many letters are in {word}?", "response": f"{word} has {len(word)} letters."}
    if kind == 3:
        fruit = rng.choice(sorted(FRUITS))
        return {"instruction": f"What color is a ripe {fruit}?", "response": f"A ripe {fruit} is {FRUITS[fruit]}."}
    animals = rng.sample(ANIMALS, 3)
    return {"instruction": "Sort these animals: " + ", ".join(animals), "response": ", ".join(sorted(animals))}


def synthetic_records(date: str, count: int) -> list[dict[str, str]]:
    rng = random.Random(seed_for(date, "corpus"))
    return [_record(rng) for _ in range(count)]


def synthetic_jsonl(date: str, count: int) -> bytes:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in synthetic_records(date, count)).encode()
