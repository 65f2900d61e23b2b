"""Reading the live metrics stream back and turning it into the run page's series."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from airflow_provider_trainium.plugins import stream as view_stream
from airflow_provider_trainium.plugins.stream import build_series, progress_label
from trainium_trainer.boundary import StreamFormatError, parse_chunk
from trainium_trainer.common.stream import read_records


def read_stream(output_uri: str, **kwargs) -> dict | None:
    """The view's read of a run whose output is the artifact root itself; its records per source."""
    read = view_stream.read_stream(output_uri, output_uri, **kwargs)
    return None if read is None else read.sources


def read_with_notes(root) -> view_stream.StreamRead:
    read = view_stream.read_stream(root.as_uri(), root.as_uri())
    assert read is not None
    return read


def write_chunk(root: Path, source: str, seq: int, records: list[dict], tail: str = "") -> None:
    folder = root / "stream" / source
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{seq:06d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + tail)


def train(step: int, loss: float, t: float, **extra) -> dict:
    record = {"v": 1, "kind": "train", "time": t, "step": step, "total_steps": 4, "epoch": 0, "loss": loss}
    return {**record, "samples_per_s": 100.0 + step, "tokens_per_s": None, "mfu": None, "lr": 0.1, **extra}


def test_no_stream_folder_reads_as_none(tmp_path):
    assert read_stream(tmp_path.as_uri()) is None


def test_chunks_are_read_in_sequence_order_per_source(tmp_path):
    write_chunk(tmp_path, "train", 1, [train(3, 0.7, 1003.0), train(4, 0.6, 1004.0)])
    write_chunk(tmp_path, "train", 0, [train(1, 0.9, 1001.0), train(2, 0.8, 1002.0)])
    # Written out of order, so no file system's listing order happens to be the sequence order.
    for seq in (5, 9, 2, 11, 7, 10, 3, 8, 4, 6):
        write_chunk(tmp_path, "train", seq, [train(seq + 3, 0.5, 1003.0 + seq)])
    device = {"v": 1, "kind": "device", "time": 1000.5, "node": 0, "neuroncores": {"0": 40.0, "1": 60.0},
              "device_mem_used_bytes": 1}  # fmt: skip
    write_chunk(tmp_path, "monitor-node0", 0, [device])
    sources = read_stream(tmp_path.as_uri())
    assert [r["step"] for r in sources["train"]] == [1, 2, 3, 4, *range(5, 15)]
    sources["train"] = sources["train"][:4]
    series = build_series(sources)
    assert series["loss"] == {"x": [1, 2, 3, 4], "y": [0.9, 0.8, 0.7, 0.6]}
    assert series["throughput"]["x"] == [0.5, 1.5, 2.5, 3.5]  # seconds since the first record of any source
    assert series["throughput"]["samples_per_s"] == [101.0, 102.0, 103.0, 104.0]
    assert series["neuroncores"] == {"x": [0.0], "cores": {"node0/nc0": [40.0], "node0/nc1": [60.0]}}
    assert series["progress"] == {"step": 4, "total_steps": 4}


@pytest.mark.parametrize(
    "torn",
    [
        '{"v": 1, "kind": "train", "st',  # the write stopped mid-record
        json.dumps(train(9, 0.1, 1009.0)),  # a whole record, but its newline never came
        '{"v": 1, "kind": "train", "st\n',  # cut short, then terminated by whatever wrote it
    ],
    ids=["unterminated", "unterminated-but-parsable", "terminated-unparsable"],
)
def test_the_ui_and_the_trainer_skip_a_torn_last_line_alike(tmp_path, torn):
    write_chunk(tmp_path, "train", 0, [train(1, 0.9, 1001.0), train(2, 0.8, 1002.0)], tail=torn)
    write_chunk(tmp_path, "train", 1, [train(3, 0.7, 1003.0)])
    ui = read_stream(tmp_path.as_uri())["train"]
    trainer = read_records(tmp_path.as_uri(), "train")
    assert [r["step"] for r in ui] == [r["step"] for r in trainer] == [1, 2, 3]
    assert ui == trainer


def test_only_source_folders_and_chunk_files_are_read(tmp_path):
    write_chunk(tmp_path, "train", 0, [train(1, 0.9, 1001.0)])
    (tmp_path / "stream" / "train" / "000001.jsonl.tmp-0a1b").write_text("{half a chunk being written")
    (tmp_path / "stream" / "train" / "notes.txt").write_text("not a chunk")
    (tmp_path / "stream" / "README").write_text("not a source")
    assert {name: [r["step"] for r in recs] for name, recs in read_stream(tmp_path.as_uri()).items()} == {"train": [1]}


def test_a_malformed_line_before_the_last_fails_the_trainers_reader_and_the_view_skips_its_chunk(tmp_path):
    write_chunk(
        tmp_path,
        "train",
        0,
        [train(1, 0.9, 1001.0)],
        tail='{"v": 1, "kind": "tr\n' + json.dumps(train(2, 0.8, 1002.0)) + "\n",
    )
    write_chunk(tmp_path, "train", 1, [train(3, 0.7, 1003.0)])
    with pytest.raises(StreamFormatError, match="000000.jsonl line 2"):
        read_records(tmp_path.as_uri(), "train")
    read = read_with_notes(tmp_path)  # the same rule: the chunk is not what a writer wrote; the page still loads
    assert [r["step"] for r in read.sources["train"]] == [3]
    (note,) = read.summary()["notes"]
    assert "train/000000.jsonl line 2" in note and "chunk skipped" in note


def test_a_torn_line_and_unknown_records_are_skipped():
    text = json.dumps(train(1, 0.5, 1.0)) + "\n" + json.dumps({"v": 2, "kind": "train"}) + "\n" + '{"v": 1, "ki'
    assert [r["step"] for r in parse_chunk(text)] == [1]
    series = build_series({"train": parse_chunk(text) + [{"v": 1, "kind": "future", "time": 2.0}]})
    assert series["loss"]["x"] == [1]


def test_non_finite_values_become_gaps():
    series = build_series({"train": [train(1, math.nan, 1.0), train(2, math.inf, 2.0), train(3, 0.1, 3.0)]})
    assert series["loss"]["y"] == [None, None, 0.1]
    json.dumps(series, allow_nan=False)  # what the API answers must be strict JSON


def test_cores_of_two_nodes_leave_gaps_where_the_other_node_sampled():
    def device(node: int, t: float, util: float) -> dict:
        return {"v": 1, "kind": "device", "time": t, "node": node, "neuroncores": {"0": util}}

    series = build_series({"monitor-node0": [device(0, 1.0, 10.0)], "monitor-node1": [device(1, 2.0, 20.0)]})
    assert series["neuroncores"] == {"x": [0.0, 1.0], "cores": {"node0/nc0": [10.0, None], "node1/nc0": [None, 20.0]}}


def test_eval_records_are_their_own_series():
    evals = [{"v": 1, "kind": "eval", "time": 5.0, "step": 4, "loss": 0.3, "accuracy": 0.9}]
    series = build_series({"train": [train(4, 0.4, 4.0), *evals]})
    assert series["eval"] == {"x": [4], "loss": [0.3], "accuracy": [0.9]}
    assert series["loss"]["x"] == [4]


def test_host_cpu_is_a_series_per_node():
    def host(node: int, t: float, cpu: float) -> dict:
        return {"v": 1, "kind": "host", "time": t, "node": node, "cpu_percent": cpu, "mem_used_bytes": 1,
                "mem_total_bytes": 2}  # fmt: skip

    series = build_series(
        {"monitor-node0": [host(0, 1.0, 50.0), host(0, 3.0, 70.0)], "monitor-node1": [host(1, 2.0, 5.0)]}
    )
    assert series["host"] == {"x": [0.0, 1.0, 2.0], "cpu": {"node0": [50.0, None, 70.0], "node1": [None, 5.0, None]}}
    assert series["neuroncores"] == {"x": [], "cores": {}}


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ({"step": "3"}, "step is not a whole number"),
        ({"step": 2.5}, "step is not a whole number"),
        ({"step": None}, "step is missing"),
        ({"loss": "low"}, "loss is not a number"),
        ({"loss": [0.1]}, "loss is not a number"),
        ({"mfu": True}, "mfu is not a number"),
        ({"total_steps": {"n": 4}}, "total_steps is not a whole number"),
        ({"time": "noon"}, "time is not a finite number"),
        ({"time": math.inf}, "time is not a finite number"),
        ({"step": math.nan}, "step is not a whole number"),
    ],
)
def test_a_record_of_the_wrong_shape_is_skipped_with_a_note(tmp_path, bad, why):
    write_chunk(tmp_path, "train", 0, [train(1, 0.9, 1001.0), {**train(2, 0.8, 1002.0), **bad}, train(3, 0.7, 1003.0)])
    read = read_with_notes(tmp_path)
    assert [r["step"] for r in read.sources["train"]] == [1, 3]
    (note,) = read.summary()["notes"]
    assert note.startswith("train/000000.jsonl record 2: " + why) and note.endswith("record skipped")
    json.dumps(build_series(read.sources), allow_nan=False)  # the answer stays strict JSON


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "device", "node": 0, "neuroncores": ["50"]},
        {"kind": "device", "node": 0, "neuroncores": {"core0": 50.0}},
        {"kind": "device", "node": 0, "neuroncores": {"0": "busy"}},
        {"kind": "device", "node": "0", "neuroncores": {"0": 1.0}},
        {"kind": "host", "node": -1.5, "cpu_percent": 5.0},
        {"kind": "host", "node": 0, "cpu_percent": "5%"},
    ],
)
def test_monitor_records_of_the_wrong_shape_are_skipped(tmp_path, bad):
    good = {"v": 1, "time": 1.0, "kind": "host", "node": 0, "cpu_percent": 10.0}
    write_chunk(tmp_path, "monitor-node0", 0, [good, {"v": 1, "time": 2.0, **bad}])
    read = read_with_notes(tmp_path)
    series = build_series(read.sources)  # what used to raise (and answer 500) for these
    assert series["host"]["cpu"] == {"node0": [10.0]} and series["neuroncores"]["cores"] == {}
    assert len(read.summary()["notes"]) == 1


def test_whole_float_steps_plot_as_integers(tmp_path):
    write_chunk(tmp_path, "train", 0, [{**train(1, 0.9, 1.0), "step": 1.0}])
    assert build_series(read_stream(tmp_path.as_uri()))["loss"]["x"] == [1]


def test_many_bad_records_give_a_bounded_list_of_notes(tmp_path):
    write_chunk(tmp_path, "train", 0, [{**train(i, 0.5, float(i)), "loss": "x"} for i in range(50)])
    notes = read_with_notes(tmp_path).summary()["notes"]
    assert len(notes) == view_stream.MAX_NOTES + 1 and notes[-1] == f"{50 - view_stream.MAX_NOTES} more skipped"


def test_the_read_keeps_at_most_max_records_the_newest_and_says_so(tmp_path):
    for seq in range(6):
        write_chunk(tmp_path, "train", seq, [train(seq * 10 + i, 0.5, float(seq * 10 + i)) for i in range(10)])
    write_chunk(tmp_path, "monitor-node0", 0, [{"v": 1, "time": float(i), "kind": "host", "node": 0,
                                               "cpu_percent": 1.0} for i in range(40)])  # fmt: skip
    read = view_stream.read_stream(tmp_path.as_uri(), tmp_path.as_uri(), max_records=50)
    assert [r["step"] for r in read.sources["train"]] == list(range(35, 60))  # half the budget each, newest
    assert len(read.sources["monitor-node0"]) == 25
    assert read.capped and any("50 a run" in n for n in read.summary()["notes"])
    full = view_stream.read_stream(tmp_path.as_uri(), tmp_path.as_uri(), max_records=200)
    assert not full.capped and full.summary()["notes"] == [] and len(full.sources["train"]) == 60


def test_a_chunk_over_the_size_limit_is_skipped_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(view_stream, "MAX_CHUNK_BYTES", 1000)
    write_chunk(tmp_path, "train", 0, [train(i, 0.5, float(i)) for i in range(30)])  # ~6 kB
    write_chunk(tmp_path, "train", 1, [train(31, 0.5, 31.0)])
    read = read_with_notes(tmp_path)
    assert [r["step"] for r in read.sources["train"]] == [31]
    assert read.summary()["notes"] == ["train/000000.jsonl: larger than 1000 bytes; chunk skipped"]


def test_only_the_train_and_monitor_sources_are_read(tmp_path):
    write_chunk(tmp_path, "train", 0, [train(1, 0.9, 1.0)])
    write_chunk(tmp_path, "somebody-else", 0, [train(2, 0.9, 2.0)])
    assert set(read_stream(tmp_path.as_uri())) == {"train"}


def test_sources_beyond_the_limit_are_not_read_and_the_read_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(view_stream, "MAX_SOURCES", 2)
    for node in range(3):
        write_chunk(tmp_path, f"monitor-node{node}", 0, [{"v": 1, "time": 1.0, "kind": "host", "node": node}])
    read = read_with_notes(tmp_path)
    assert sorted(read.sources) == ["monitor-node0", "monitor-node1"] and read.capped


@pytest.mark.parametrize(
    ("progress", "state", "label"),
    [
        ({"step": 12, "total_steps": 1000}, "running", "step 12/1000 (1%)"),
        ({"step": 5, "total_steps": 1000}, "running", "step 5/1000 (1%)"),  # half a percent rounds up, as in JS
        ({"step": 7, "total_steps": None}, "running", "step 7"),  # a script that never gave total_steps
        ({"step": 100, "total_steps": 110}, "success", "last logged step 100"),
        ({"step": 100, "total_steps": 110}, "failed", "last logged step 100"),
        ({"step": None, "total_steps": None}, "running", None),
    ],
)
def test_a_runs_progress_line_while_it_runs_and_once_it_ended(progress, state, label):
    assert progress_label(progress, state) == label


def test_utilization_charts_are_percent_from_0_to_100(tmp_path):
    host = {"v": 1, "kind": "host", "time": 1000.0, "node": 0, "cpu_percent": 3.0}
    write_chunk(tmp_path, "monitor-node0", 0, [host])
    series = build_series(read_stream(tmp_path.as_uri()))
    assert series["y_range"] == {"neuroncores": [0, 100], "host": [0, 100]}
