"""The one-line progress report the main rank logs at a steady interval, so a task log shows where a run is.

    step 120/1000 (12%) loss 2.31 | 9.9k tokens/s | MFU 31% | ETA 14m | cost so far $0.41

The cost comes from ``TRAINIUM_COST_PER_HOUR_USD`` (the whole job's hourly rate, set by the provider) times the
time since this process started training; with ``TRAINIUM_COST_IS_ESTIMATE=1`` (local compute) the real cost is
$0.00 and the figure is the estimate for the instance layout the run stands in for. Without the rate, no cost.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from trainium_trainer import boundary

log = logging.getLogger("trainer")

DEFAULT_EVERY_S = 30.0


def human_rate(value: float) -> str:
    """9912 -> ``9.9k``, 1.5e6 -> ``1.5M``, 523.4 -> ``523``."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.1f}{suffix}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.0f}"


def human_duration(seconds: float) -> str:
    """45 -> ``45s``, 840 -> ``14m``, 7500 -> ``2h05m``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{round(seconds / 60)}m"
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m"


def cost_part(elapsed_s: float, env: Mapping[str, str]) -> str | None:
    rate = env.get(boundary.ENV_COST_PER_HOUR_USD, "").strip()
    if not rate:
        return None
    try:
        usd = float(rate) * elapsed_s / 3600
    except ValueError:
        return None
    if env.get(boundary.ENV_COST_IS_ESTIMATE, "").strip() == "1":
        return f"cost so far $0.00 (est. ${usd:.2f} on the instance layout)"
    return f"cost so far ${usd:.2f}"


def format_line(
    record: Mapping[str, Any], eta_s: float | None, elapsed_s: float, env: Mapping[str, str] = os.environ
) -> str:
    """The progress line of one train record (see the stream's train schema)."""
    step, total = int(record["step"]), int(record["total_steps"])
    percent = 100 * step // total if total else 0
    loss = record.get("loss")
    loss_text = f"{loss:.3g}" if isinstance(loss, float | int) and math.isfinite(loss) else "nan"
    parts = [f"step {step}/{total} ({percent}%) loss {loss_text}"]
    if record.get("tokens_per_s") is not None:
        parts.append(f"{human_rate(record['tokens_per_s'])} tokens/s")
    elif record.get("samples_per_s") is not None:
        parts.append(f"{human_rate(record['samples_per_s'])} samples/s")
    if record.get("mfu") is not None:
        value = 100 * record["mfu"]
        parts.append(f"MFU {value:.0f}%" if value >= 1 else f"MFU {value:.2g}%")
    parts.append(f"ETA {human_duration(eta_s)}" if eta_s is not None else "ETA ?")
    cost = cost_part(elapsed_s, env)
    if cost:
        parts.append(cost)
    return " | ".join(parts)


class ProgressReporter:
    """Logs the progress line for the first record, then at most once every ``every_s`` seconds, and at the end.

    The ETA is the remaining steps at the pace of the steps this process ran (a resumed run counts from where
    it resumed), so compilation time early on makes it pessimistic rather than wrong later.
    """

    def __init__(
        self,
        start_step: int,
        every_s: float = DEFAULT_EVERY_S,
        env: Mapping[str, str] = os.environ,
        clock: Callable[[], float] = time.monotonic,
        emit: Callable[[str], None] | None = None,
    ) -> None:
        self.start_step = start_step
        self.every_s = every_s
        self.env = env
        self.clock = clock
        self.started = clock()
        self.last: float | None = None
        self.emit = emit or (lambda line: log.info("progress %s", line))

    def eta_s(self, step: int, total: int, now: float) -> float | None:
        done = step - self.start_step
        if done <= 0:
            return None
        return (total - step) * (now - self.started) / done

    def update(self, record: Mapping[str, Any]) -> str | None:
        """Log the line for ``record`` when it is due; returns the line logged, if any."""
        now = self.clock()
        final = record["step"] >= record["total_steps"]
        if self.last is not None and now - self.last < self.every_s and not final:
            return None
        self.last = now
        line = format_line(record, self.eta_s(record["step"], record["total_steps"], now), now - self.started, self.env)
        self.emit(line)
        return line
