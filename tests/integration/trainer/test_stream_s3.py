"""The live metrics stream on S3 (the moto server): numbered chunk objects, history kept across writers."""

from __future__ import annotations

import pytest

from tests.integration.conftest import trainer_s3
from trainium_trainer.common import stream


@pytest.fixture
def s3_env(aws_conn_id: str, monkeypatch: pytest.MonkeyPatch):
    """The AWS_* environment a trainer gets, pointing at the moto server, and a bucket."""
    yield from trainer_s3(monkeypatch)


def test_chunks_are_objects_and_a_restarted_writer_continues_the_numbering(s3_env) -> None:
    out = "s3://runs/llama/run-1"
    first = stream.StreamWriter(out, "train", every_s=0)
    for step in (1, 2):
        first.append(stream.train_record(step=step, total_steps=4, epoch=0, loss=2.0, lr=0.1))
    # The run is killed here and resumed by a new process: a new writer on the same stream.
    second = stream.StreamWriter(out, "train", every_s=0)
    assert second.seq == 2
    second.append(stream.train_record(step=3, total_steps=4, epoch=0, loss=1.5, lr=0.1))
    second.append(stream.eval_record(step=3, loss=1.4))
    keys = [o["Key"] for o in s3_env.list_objects_v2(Bucket="runs", Prefix="llama/run-1/stream/")["Contents"]]
    assert sorted(keys) == [f"llama/run-1/stream/train/00000{i}.jsonl" for i in range(4)]
    records = stream.read_records(out, "train")
    assert [(r["kind"], r["step"]) for r in records] == [("train", 1), ("train", 2), ("train", 3), ("eval", 3)]
    assert stream.list_sources(out) == ["train"]
