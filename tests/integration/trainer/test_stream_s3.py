"""The live metrics stream on S3 (the moto server): numbered chunk objects, history kept across writers."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import MOTO_REGION
from trainium_trainer.common import stream


@pytest.fixture
def s3_env(aws_conn_id: str, monkeypatch: pytest.MonkeyPatch):
    """The AWS_* environment a trainer gets, pointing at the moto server, and a bucket."""
    import boto3
    import fsspec

    endpoint = json.loads(os.environ["AIRFLOW_CONN_AWS_MOTO"])["extra"]["endpoint_url"]
    for key, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": MOTO_REGION}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    fsspec.filesystem("s3").clear_instance_cache()  # a fresh client that sees this test's environment
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=MOTO_REGION)
    s3.create_bucket(Bucket="runs")
    yield s3
    fsspec.filesystem("s3").clear_instance_cache()


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
