"""Artifacts on S3 are read with the trainium connection's AWS connection, never the default one."""

from __future__ import annotations

import json

import pytest

from airflow_provider_trainium import artifacts
from airflow_provider_trainium.operators.training import TrainiumTrainingOperator
from airflow_provider_trainium.sensors.compile_cache import TrainiumCompileCacheSensor
from tests.conftest import free_port, set_trainium_connection

BUCKET = "trainium-artifacts-test"
ROOT = f"s3://{BUCKET}/root"


@pytest.fixture
def s3_root(aws_conn_id: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A bucket reachable only through ``aws_moto``: ``aws_default`` points at a closed port."""
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    dead = {"conn_type": "aws", "login": "x", "password": "x",
            "extra": {"endpoint_url": f"http://127.0.0.1:{free_port()}", "region_name": "us-east-1",
                      "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1}}}  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps(dead))
    set_trainium_connection(monkeypatch, aws_conn_id=aws_conn_id, artifact_root=ROOT)
    hook = S3Hook(aws_conn_id=aws_conn_id)
    hook.create_bucket(BUCKET)
    hook.load_string('{"accuracy": 0.97, "history": [1, 2]}', "root/run/model/metrics.json", BUCKET)
    hook.load_string('{"key": "abc"}', "root/cache/keys/abc.json", BUCKET)
    hook.load_bytes(b"\x00\x01", "root/run/model/model.bin", BUCKET)
    return ROOT


def test_reads_through_the_trainium_connection(s3_root: str) -> None:
    assert artifacts.read_json(f"{s3_root}/run/model/metrics.json")["accuracy"] == 0.97
    assert artifacts.read_bytes(f"{s3_root}/run/model/model.bin") == b"\x00\x01"
    assert artifacts.exists(f"{s3_root}/run/model")
    assert not artifacts.exists(f"{s3_root}/run/nothing")
    assert artifacts.list_uris(f"{s3_root}/run/model/") == [
        f"{s3_root}/run/model/metrics.json",
        f"{s3_root}/run/model/model.bin",
    ]
    assert artifacts.list_uris(f"{s3_root}/run/nothing") == []
    assert artifacts.read_json(f"{s3_root}/run/model/absent.json", missing_ok=True) is None
    with pytest.raises(FileNotFoundError, match="absent.json"):
        artifacts.read_json(f"{s3_root}/run/model/absent.json")


def test_training_metrics_use_the_connections_aws_conn_id(s3_root: str) -> None:
    op = TrainiumTrainingOperator(task_id="train", entry_point="trainium_trainer.mnist_mlp.train")
    assert op.read_metrics(f"{s3_root}/run/model/")["accuracy"] == 0.97
    assert op.read_metrics(f"{s3_root}/run/empty") is None


def test_compile_cache_sensor_uses_the_connections_aws_conn_id(s3_root: str) -> None:
    from airflow_provider_trainium import compile_manifest

    found = TrainiumCompileCacheSensor(task_id="wait", compile_cache_uri=f"{s3_root}/cache", cache_key="abc")
    assert found.poke({}).is_done is False  # a key record alone: any job could have written it
    compile_manifest.record(s3_root, f"{s3_root}/cache", {"task_id": "compile"}, key="abc")
    assert found.poke({}).xcom_value == {"key": "abc"}
    waiting = TrainiumCompileCacheSensor(task_id="wait2", compile_cache_uri=f"{s3_root}/cache", cache_key="def")
    assert waiting.poke({}).is_done is False


def test_compile_key_records_use_the_connections_aws_conn_id(s3_root: str) -> None:
    from airflow_provider_trainium.operators.compile import read_key_record, write_key_record

    assert read_key_record(f"{s3_root}/cache", "abc") == {"key": "abc"}
    assert read_key_record(f"{s3_root}/cache", "missing") is None
    write_key_record(f"{s3_root}/cache", "new", {"key": "new", "metrics": {"xla_compilations": 3}}, None)
    assert read_key_record(f"{s3_root}/cache", "new")["metrics"] == {"xla_compilations": 3}


def test_the_views_stream_reader_lists_sources_and_chunks_through_the_connection(s3_root: str, aws_conn_id: str):
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    from airflow_provider_trainium.plugins.app import artifact_settings
    from airflow_provider_trainium.plugins.stream import read_stream

    hook = S3Hook(aws_conn_id=aws_conn_id)
    record = {"v": 1, "kind": "train", "time": 1.0, "step": 1, "total_steps": 2, "loss": 0.5}
    torn = json.dumps(record) + "\n" + json.dumps({**record, "step": 2}) + "\n" + '{"v": 1, "ki'
    hook.load_string(torn, "root/run/model/stream/train/000000.jsonl", BUCKET)
    hook.load_string(json.dumps({**record, "step": 3}) + "\n", "root/run/model/stream/train/000001.jsonl", BUCKET)
    host = {"v": 1, "kind": "host", "time": 2.0, "node": 0, "cpu_percent": 5.0}
    hook.load_string(json.dumps(host) + "\n", "root/run/model/stream/monitor-node0/000000.jsonl", BUCKET)
    assert artifacts.list_uris(f"{s3_root}/run/model", kind="dir") == [f"{s3_root}/run/model/stream"]
    assert artifacts.list_uris(f"{s3_root}/run/model", kind="file") == [
        f"{s3_root}/run/model/metrics.json",
        f"{s3_root}/run/model/model.bin",
    ]
    root, conn_id = artifact_settings()
    assert conn_id == aws_conn_id
    sources = read_stream(f"{s3_root}/run/model", root, conn_id).sources
    assert {name: [r.get("step") for r in recs] for name, recs in sources.items()} == {
        "monitor-node0": [None],
        "train": [1, 2, 3],  # the torn last line of chunk 0 skipped, as the trainer's reader does
    }
    assert read_stream(f"{s3_root}/run/nothing", root, aws_conn_id) is None
