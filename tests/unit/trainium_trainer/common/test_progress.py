"""The progress line: its parts, the cost contract's variables, and its interval."""

from __future__ import annotations

import pytest

from trainium_trainer.common.progress import ProgressReporter, format_line, human_duration, human_rate

RECORD = {"kind": "train", "step": 120, "total_steps": 1000, "loss": 2.3125, "tokens_per_s": 9912.0,
          "samples_per_s": None, "mfu": 0.312}  # fmt: skip


def test_the_full_line_on_aws() -> None:
    env = {"TRAINIUM_COST_PER_HOUR_USD": "21.5", "TRAINIUM_COST_IS_ESTIMATE": "0"}
    line = format_line(RECORD, eta_s=840, elapsed_s=68.7, env=env)
    assert line == "step 120/1000 (12%) loss 2.31 | 9.9k tokens/s | MFU 31% | ETA 14m | cost so far $0.41"


def test_local_runs_cost_nothing_and_show_the_estimate() -> None:
    env = {"TRAINIUM_COST_PER_HOUR_USD": "21.5", "TRAINIUM_COST_IS_ESTIMATE": "1"}
    line = format_line(RECORD, eta_s=840, elapsed_s=68.7, env=env)
    assert line.endswith("| ETA 14m | cost so far $0.00 (est. $0.41 on the instance layout)")


def test_samples_without_mfu_or_cost() -> None:
    record = {**RECORD, "tokens_per_s": None, "samples_per_s": 523.4, "mfu": None}
    line = format_line(record, eta_s=None, elapsed_s=5, env={})
    assert line == "step 120/1000 (12%) loss 2.31 | 523 samples/s | ETA ?"


@pytest.mark.parametrize(("value", "text"), [(9912, "9.9k"), (1.5e6, "1.5M"), (523.4, "523"), (2.345, "2.35")])
def test_human_rate(value: float, text: str) -> None:
    assert human_rate(value) == text


@pytest.mark.parametrize(("seconds", "text"), [(45, "45s"), (840, "14m"), (7500, "2h05m"), (-3, "0s")])
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_first_record_then_every_interval_then_the_last_step() -> None:
    now = [0.0]
    lines: list[str] = []
    reporter = ProgressReporter(start_step=100, every_s=30, env={}, clock=lambda: now[0], emit=lines.append)
    steps = {10.0: 110, 20.0: 120, 40.0: 140, 50.0: 150, 55.0: 200}
    for t, step in steps.items():
        now[0] = t
        reporter.update({**RECORD, "step": step, "total_steps": 200})
    assert [line.split(" ", 2)[1] for line in lines] == ["110/200", "140/200", "200/200"]
    assert "ETA 2m" in lines[0]  # 90 steps left at 10 steps / 10 s since the resume at step 100: 90 s
    assert "ETA 0s" in lines[-1]
