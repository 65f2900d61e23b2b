"""The live metrics stream on file://: chunk numbering, history kept across restarts, the reader's tolerance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.common import stream


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(step: int, loss: float = 1.0) -> dict:
    return stream.train_record(step=step, total_steps=10, epoch=0, loss=loss, lr=0.1)


def test_every_flush_is_a_new_numbered_chunk_and_a_restart_continues_after_the_highest(tmp_path: Path) -> None:
    out = f"file://{tmp_path}"
    clock = Clock()
    writer = stream.StreamWriter(out, "train", every_s=10, clock=clock)
    writer.append(record(1))
    assert stream.chunks(out, "train") == []  # buffered until the interval has passed
    clock.now = 10
    writer.append(record(2))
    writer.flush()  # nothing new: no empty chunk
    writer.append(record(3))
    writer.close()
    folder = tmp_path / "stream" / "train"
    assert sorted(p.name for p in folder.iterdir()) == ["000000.jsonl", "000001.jsonl"]
    assert [r["step"] for r in map(json.loads, (folder / "000000.jsonl").read_text().splitlines())] == [1, 2]

    # A killed and resumed run: a new writer keeps the history and continues the numbering.
    again = stream.StreamWriter(out, "train", every_s=10, clock=clock)
    again.append(record(3, loss=0.5))
    again.close()
    assert (folder / "000001.jsonl").read_text().count("\n") == 1  # untouched
    assert sorted(p.name for p in folder.iterdir())[-1] == "000002.jsonl"
    records = stream.read_records(out, "train")
    assert [r["step"] for r in records] == [1, 2, 3, 3]
    assert all(r["v"] == 1 and r["kind"] == "train" and isinstance(r["time"], float) for r in records)


def test_numbering_follows_the_highest_chunk_not_the_count(tmp_path: Path) -> None:
    folder = tmp_path / "stream" / "monitor-node1"
    folder.mkdir(parents=True)
    (folder / "000007.jsonl").write_text("")
    (folder / "notes.txt").write_text("not a chunk")
    writer = stream.StreamWriter(str(tmp_path), stream.monitor_source(1), every_s=0)
    writer.append({"kind": "host", "node": 1, "cpu_percent": 1.0, "mem_used_bytes": 1, "mem_total_bytes": 2})
    assert (folder / "000008.jsonl").exists()


def test_reader_skips_unknown_kinds_and_versions_and_keeps_unknown_keys(tmp_path: Path) -> None:
    folder = tmp_path / "stream" / "train"
    folder.mkdir(parents=True)
    lines = [
        {"v": 1, "kind": "train", "time": 1.0, "step": 1, "future_key": "x"},
        {"v": 1, "kind": "something-new", "time": 2.0},
        {"v": 2, "kind": "train", "time": 3.0, "step": 2},
        {"v": 1, "kind": "eval", "time": 4.0, "step": 1, "loss": None, "accuracy": 0.9},
    ]
    (folder / "000000.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines) + "\n")
    assert [r["step"] for r in stream.read_records(str(tmp_path), "train", kinds=["train"])] == [1]
    assert [r["kind"] for r in stream.read_records(str(tmp_path), "train", kinds=["train", "eval"])] == [
        "train",
        "eval",
    ]
    assert stream.list_sources(str(tmp_path)) == ["train"]


def test_nan_is_written_as_null(tmp_path: Path) -> None:
    writer = stream.StreamWriter(str(tmp_path), "train", every_s=0)
    writer.append(record(1, loss=float("nan")))
    assert stream.read_records(str(tmp_path), "train")[0]["loss"] is None


def test_a_failed_write_keeps_the_records_for_the_next_flush(tmp_path: Path) -> None:
    blocker = tmp_path / "stream"
    blocker.write_text("a file where the folder should be")
    writer = stream.StreamWriter(str(tmp_path), "train", every_s=0)
    writer.append(record(1))  # logged as a warning, training goes on
    assert writer.buffer and writer.seq == 0
    blocker.unlink()
    writer.append(record(2))
    assert [r["step"] for r in stream.read_records(str(tmp_path), "train")] == [1, 2]


@pytest.mark.parametrize(
    ("runtime", "env", "world", "expected"),
    [
        ("cpu", {}, 2, None),
        ("xla-cpu", {}, 2, None),
        ("neuron", {}, 32, 32 * 95e12),
        ("cpu", {"TRAINIUM_PEAK_FLOPS": "1e9"}, 2, 2e9),
    ],
)
def test_job_peak_flops(runtime: str, env: dict, world: int, expected: float | None) -> None:
    assert stream.job_peak_flops(runtime, world, env) == expected


def test_train_stream_measures_throughput_and_mfu_between_logged_steps(tmp_path: Path) -> None:
    clock = Clock()
    lines: list[str] = []
    live = stream.TrainStream(str(tmp_path), enabled=True, total_steps=100, start_step=0, items_per_step=512,
                              unit="tokens", flops_per_item=1e6, peak_flops=1e10, every_s=0, clock=clock)  # fmt: skip
    live.progress.emit = lines.append
    clock.now = 2.0
    live.train(step=10, epoch=0, loss=2.5, lr=0.1, xla_graphs=3)
    live.eval(step=10, loss=2.4)
    live.close()
    train, evaluation = stream.read_records(str(tmp_path), "train")
    assert train["tokens_per_s"] == 10 * 512 / 2.0 and train["samples_per_s"] is None
    assert train["mfu"] == pytest.approx(10 * 512 / 2.0 * 1e6 / 1e10)
    assert train["total_steps"] == 100 and train["xla_graphs"] == 3
    assert evaluation == {**evaluation, "kind": "eval", "step": 10, "loss": 2.4, "accuracy": None}
    assert lines and lines[0].startswith("step 10/100 (10%) loss 2.5 | 2.6k tokens/s | MFU 26% | ETA 18s")


def test_a_disabled_train_stream_writes_nothing(tmp_path: Path) -> None:
    live = stream.TrainStream(str(tmp_path), enabled=False, total_steps=10, start_step=0, items_per_step=1,
                              unit="samples")  # fmt: skip
    live.train(step=1, epoch=0, loss=1.0, lr=0.1)
    live.close()
    assert not (tmp_path / "stream").exists()
