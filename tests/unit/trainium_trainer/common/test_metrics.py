"""Each logged step is recorded once: one train record, streamed, logged as progress and kept for metrics.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainium_trainer.common import stream
from trainium_trainer.common.metrics import TrainMetrics


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def recorder(tmp_path: Path, clock: Clock, **kwargs) -> TrainMetrics:
    options = {"enabled": True, "total_steps": 100, "start_step": 0, "items_per_step": 512, "unit": "tokens",
               "flops_per_item": 1e6, "peak_flops": 1e10, "every_s": 0, "clock": clock, **kwargs}  # fmt: skip
    return TrainMetrics(str(tmp_path), **options)


def test_throughput_and_mfu_are_measured_between_logged_steps(tmp_path: Path) -> None:
    clock = Clock()
    lines: list[str] = []
    metrics = recorder(tmp_path, clock)
    metrics.progress.emit = lines.append
    clock.now = 2.0
    metrics.train(step=10, epoch=0, loss=2.5, lr=0.1, xla_graphs=3)
    metrics.eval(step=10, loss=2.4)
    metrics.close()
    train, evaluation = stream.read_records(str(tmp_path), "train")
    assert train["tokens_per_s"] == 10 * 512 / 2.0 and train["samples_per_s"] is None
    assert train["mfu"] == pytest.approx(10 * 512 / 2.0 * 1e6 / 1e10)
    assert train["total_steps"] == 100 and train["xla_graphs"] == 3
    assert evaluation == {**evaluation, "kind": "eval", "step": 10, "loss": 2.4, "accuracy": None}
    assert lines and lines[0].startswith("step 10/100 (10%) loss 2.5 | 2.6k tokens/s | MFU 26% | ETA 18s")
    assert metrics.mfu(5000.0) == pytest.approx(5000 * 1e6 / 1e10)


def test_every_step_is_appended_once_and_metrics_json_is_written_once_at_the_end(tmp_path: Path) -> None:
    clock = Clock()
    metrics = recorder(tmp_path, clock)
    for step in (10, 20, 30):
        clock.now += 1.0
        metrics.train(step=step, epoch=0, loss=1.0 / step, lr=0.1)
        # a new chunk per flush, nothing rewritten, and no summary before the end
        assert len(stream.chunks(str(tmp_path), "train")) == step // 10
        assert not (tmp_path / "metrics.json").exists()
    written = metrics.finish({"steps": 30, "mfu": metrics.mfu(100.0)})
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert on_disk == written and on_disk["steps"] == 30
    streamed = stream.read_records(str(tmp_path), "train")
    assert on_disk["history"] == streamed  # the same records, not a second recording
    assert [h["step"] for h in on_disk["history"]] == [10, 20, 30]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json", "stream"]  # no metrics.jsonl


def test_without_a_peak_mfu_is_null_in_the_stream_and_the_summary(tmp_path: Path) -> None:
    clock = Clock()
    metrics = recorder(tmp_path, clock, peak_flops=stream.job_peak_flops(2, {}))
    clock.now = 1.0
    metrics.train(step=10, epoch=0, loss=float("nan"), lr=0.1)
    summary = metrics.finish({"mfu": metrics.mfu(1000.0)})
    (record,) = stream.read_records(str(tmp_path), "train")
    assert record["mfu"] is None and record["tokens_per_s"] > 0 and summary["mfu"] is None
    assert record["loss"] is None and summary["history"][0]["loss"] is None  # NaN is no JSON: null in both


def test_a_compile_trial_keeps_its_summary_but_streams_nothing(tmp_path: Path) -> None:
    metrics = recorder(tmp_path, Clock(), live=False)
    metrics.train(step=1, epoch=0, loss=1.0, lr=0.1)
    metrics.finish({"compile_only": True})
    assert not (tmp_path / "stream").exists() and metrics.progress is None
    assert json.loads((tmp_path / "metrics.json").read_text())["compile_only"] is True


def test_other_ranks_record_and_write_nothing(tmp_path: Path) -> None:
    metrics = recorder(tmp_path, Clock(), enabled=False)
    metrics.train(step=1, epoch=0, loss=1.0, lr=0.1)
    metrics.eval(step=1, loss=1.0)
    assert metrics.finish({"steps": 1}) == {"steps": 1, "history": []}
    assert list(tmp_path.iterdir()) == []
