"""A run's export from a hand-written stream, read through the provider's validated reader."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.trackers.gather import TaskInstanceId, collect
from trainium_trainer import boundary

TI = TaskInstanceId("dag", "manual__2026-01-01", "train", -1, 2)


def write_chunk(output: Path, source: str, seq: int, records: list[dict]) -> None:
    folder = output / boundary.STREAM_DIR / source
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(boundary.stamp(r, 1_700_000_000.0 + i)) for i, r in enumerate(records)]
    (folder / boundary.chunk_name(seq)).write_text("\n".join(lines) + "\n")


def train(step: int, loss: float | None, **fields) -> dict:
    return boundary.record(boundary.KIND_TRAIN, step=step, loss=loss, samples_per_s=100.0 + step, **fields)


def test_curves_params_cost_and_final_metrics_come_from_the_run(tmp_path):
    output = tmp_path / "root" / "runs" / "out"
    write_chunk(output, boundary.TRAIN_SOURCE, 0, [train(10, 2.0, lr=0.1), train(20, 1.5)])
    # a retry that resumed from step 10 replays step 20: its last record wins; a null loss is no point
    write_chunk(output, boundary.TRAIN_SOURCE, 1, [train(20, 1.4), train(30, None), train(40, 1.0),
                boundary.record(boundary.KIND_EVAL, step=40, loss=1.1, accuracy=0.9)])  # fmt: skip
    write_chunk(output, boundary.monitor_source(0), 0, [boundary.record(boundary.KIND_HOST, node=0, cpu_percent=50)])
    spec = JobSpec(name="j", entry_point="trainium_trainer.mnist_mlp.train", args=("--epochs", "1"),
                   instance_type="trn1.32xlarge", nodes=2, processes_per_node=4,
                   output_uri=output.as_uri())  # fmt: skip
    cost = {"usd": 1.25, "estimate_usd": 3.5, "wall_s": 60.0, "is_estimate": True, "price_date": "2026-11-20"}
    summary = {"accuracy": 0.91, "steps": 40, "runtime": "xla", "mfu": None}

    export = collect(TI, spec, "local", artifact_root=(tmp_path / "root").as_uri(), aws_conn_id=None,
                     cost=cost, summary=summary)  # fmt: skip

    assert [(p.step, p.value) for p in export.curves["train/loss"]] == [(10, 2.0), (20, 1.4), (40, 1.0)]
    assert [p.step for p in export.curves["train/samples_per_s"]] == [10, 20, 30, 40]
    assert [(p.step, p.value) for p in export.curves["train/lr"]] == [(10, 0.1)]
    assert [(p.step, p.value) for p in export.curves["eval/accuracy"]] == [(40, 0.9)]
    assert export.curves["train/loss"][0].timestamp_ms == 1_700_000_000_000
    assert not any(name.startswith(("host", "device")) for name in export.curves)
    assert export.scalars == {"cost/usd": 1.25, "cost/estimate_usd": 3.5, "cost/wall_s": 60.0,
                              "final/accuracy": 0.91, "final/steps": 40.0}  # fmt: skip
    assert export.last_step == 40
    assert export.params == {
        "instance_type": "trn1.32xlarge", "nodes": "2", "processes_per_node": "4", "stack": "xla",
        "compute": "local", "image": "", "entry_point": "trainium_trainer.mnist_mlp.train", "args": "--epochs 1",
        "dag_id": "dag", "run_id": "manual__2026-01-01", "task_id": "train", "map_index": "-1",
    }  # fmt: skip


def test_a_bad_record_is_skipped_with_a_note_and_no_stream_is_no_curves(tmp_path):
    output = tmp_path / "root" / "out"
    write_chunk(output, boundary.TRAIN_SOURCE, 0, [train(10, 2.0), {**train(20, 1.0), "step": "twenty"}])
    spec = JobSpec(name="j", entry_point="m", output_uri=output.as_uri())
    root = (tmp_path / "root").as_uri()
    export = collect(TI, spec, "local", artifact_root=root, aws_conn_id=None, cost=None, summary=None)
    assert [p.step for p in export.curves["train/loss"]] == [10]
    assert export.notes and "step is not a whole number" in export.notes[0]
    empty = collect(TI, JobSpec(name="j", entry_point="m", output_uri=f"{root}/none"), "local",
                    artifact_root=root, aws_conn_id=None, cost=None, summary=None)  # fmt: skip
    assert empty.curves == {} and empty.scalars == {} and empty.last_step == 0


def test_the_task_instance_key_ignores_the_try_and_tells_map_indexes_apart():
    retry = TaskInstanceId("dag", "manual__2026-01-01", "train", -1, 3)
    assert retry.key == TI.key and retry.tags()["try_number"] == "3"
    assert TaskInstanceId("dag", "manual__2026-01-01", "train", 0).key != TI.key
    assert TI.tags()["trainium.task_instance"] == TI.key and len(TI.key) == 32
