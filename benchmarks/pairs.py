"""Paired runs for benchmarks on a shared machine: the two sides alternate, and the ratio comes with its range."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def alternating_pairs(first: Callable[[], T], second: Callable[[], T], repeats: int) -> list[tuple[T, T]]:
    """``repeats`` (first, second) results; which side runs first alternates, so a slow spell hits both alike."""
    pairs = []
    for repeat in range(repeats):
        sides = [first, second]
        results: list[T | None] = [None, None]
        for side in (0, 1) if repeat % 2 == 0 else (1, 0):
            results[side] = sides[side]()
        pairs.append((results[0], results[1]))
    return pairs  # type: ignore[return-value]


def ratio_summary(ratios: list[float]) -> tuple[float, str]:
    """The median ratio and the range of all of them, e.g. ``(1.02, "0.93-1.07")``."""
    return statistics.median(ratios), f"{min(ratios):.2f}-{max(ratios):.2f}"
