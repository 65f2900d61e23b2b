"""Curves from a job's output lines: the job's metric patterns turn matching lines into stream records.

A script that never calls ``trainium_trainer.track`` (an unchanged Hugging Face Trainer script, say) still prints
its losses. When the operator gives ``metric_patterns`` (``boundary.ENV_METRIC_PATTERNS``), node 0's launcher reads
the job's output line by line, passes every line on unchanged, and hands the values a line matches to the same
``track.Tracker`` a script would call: train records (a ``loss`` match) and eval records (``eval_loss`` or
``eval_accuracy``) in ``<output_uri>/stream/train/``, where the view, the trackers and the cost line read them.

Under torchrun only local rank 0's lines count (torchrun's ``[default0]:`` prefix), as a script's own ``track``
calls count only on rank 0. A line's other fields (``lr``, ``epoch``, ``step``) go with the record it makes.
Without a ``step`` pattern the steps are counted: the n-th train line is step n, and an eval line belongs to the
last train step. A script that calls ``track`` itself should not also set patterns: both would write the same
stream.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from trainium_trainer import boundary

#: torchrun's ``--tee`` prefix of a local rank's line, ``[default3]:``: only local rank 0's lines make records.
RANK_PREFIX = re.compile(r"^\[[A-Za-z_]*(\d+)\]:")


class MetricLines:
    """Turns output lines into ``tracker`` records by ``patterns`` (field -> regex with one group)."""

    def __init__(self, patterns: Mapping[str, str], tracker: Any) -> None:
        self.patterns = {name: re.compile(pattern) for name, pattern in patterns.items()}
        self.tracker = tracker
        self.step = 0

    def feed(self, line: str) -> None:
        """Record what ``line`` holds, if anything; a value that is not a number is skipped."""
        prefix = RANK_PREFIX.match(line)
        if prefix is not None and prefix.group(1) != "0":
            return
        values: dict[str, float] = {}
        for name, pattern in self.patterns.items():
            found = pattern.search(line)
            if found is None:
                continue
            try:
                values[name] = float(found.group(1))
            except (TypeError, ValueError):
                continue
        if "loss" in values:
            step = values.get("step")
            self.step = int(step) if step is not None and math.isfinite(step) else self.step + 1
            self.tracker.log(step=self.step, loss=values["loss"], lr=values.get("lr"), epoch=values.get("epoch"))
        if "eval_loss" in values or "eval_accuracy" in values:
            step = values.get("step")
            at = int(step) if step is not None and math.isfinite(step) and "loss" not in values else self.step
            self.tracker.log_eval(step=at, loss=values.get("eval_loss"), accuracy=values.get("eval_accuracy"))

    def close(self) -> None:
        self.tracker.close()


def from_env(env: Mapping[str, str]) -> MetricLines | None:
    """The reader for this job's patterns (None when it has none, or they cannot make records)."""
    raw = env.get(boundary.ENV_METRIC_PATTERNS, "").strip()
    if not raw:
        return None
    try:
        patterns = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(patterns, dict) or boundary.metric_pattern_problems(patterns):
        return None  # the operator refused these before the job started; a hand-made job gets no curves
    from trainium_trainer.track import Tracker

    return MetricLines({str(k): str(v) for k, v in patterns.items()}, Tracker.from_env(env))
