"""The live metrics stream on file://: chunk numbering, history kept across restarts, the reader rule, the peak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainium_trainer import boundary
from trainium_trainer.common import stream
from trainium_trainer.common.errors import BadInputError


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
    ("env", "world", "expected"),
    [
        ({}, 32, None),  # no variable (a CPU, local compute): no peak, whatever the runtime
        ({"TRAINIUM_PEAK_FLOPS": ""}, 2, None),
        ({"TRAINIUM_PEAK_FLOPS": "95e12"}, 32, 32 * 95e12),
        ({"TRAINIUM_PEAK_FLOPS": " 1e9 "}, 2, 2e9),
    ],
)
def test_job_peak_flops_is_the_variable_per_rank_times_ranks(env: dict, world: int, expected: float | None) -> None:
    assert stream.job_peak_flops(world, env) == expected


@pytest.mark.parametrize("value", ["fast", "0", "-1e12", "nan", "inf"])
def test_a_peak_that_is_not_a_positive_number_is_bad_input(value: str) -> None:
    with pytest.raises(BadInputError, match="TRAINIUM_PEAK_FLOPS"):
        stream.job_peak_flops(2, {"TRAINIUM_PEAK_FLOPS": value})


def test_records_name_only_fields_of_their_kind() -> None:
    assert stream.eval_record(step=3, accuracy=0.9) == {"kind": "eval", "step": 3, "loss": None, "accuracy": 0.9}
    assert set(record(1)) == {"kind", *boundary.RECORD_FIELDS["train"]}
    with pytest.raises(ValueError, match="train records have no field tokens_per_sec"):
        boundary.record("train", step=1, tokens_per_sec=3.0)


def test_a_torn_last_line_is_skipped_and_a_malformed_line_before_it_raises(tmp_path: Path) -> None:
    folder = tmp_path / "stream" / "train"
    folder.mkdir(parents=True)
    good = json.dumps(boundary.stamp(record(1), 1.0))
    (folder / "000000.jsonl").write_text(good + "\n" + good[:-7])  # a write cut short
    (folder / "000001.jsonl").write_text(good + "\n" + good[:-7] + "\n")  # cut short, then terminated
    assert [r["step"] for r in stream.read_records(str(tmp_path), "train")] == [1, 1]
    (folder / "000002.jsonl").write_text(good[:-7] + "\n" + good + "\n")
    with pytest.raises(boundary.StreamFormatError, match=r"000002.jsonl line 1"):
        stream.read_records(str(tmp_path), "train")
