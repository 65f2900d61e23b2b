"""DCP checkpoints on S3 (the moto server) through DCP's fsspec writer and the trainer's reader."""

from __future__ import annotations

import pytest
import torch
import torch.distributed.checkpoint as dcp

from tests.integration.conftest import trainer_s3
from trainium_trainer.native import checkpoint


@pytest.fixture
def s3(aws_conn_id: str, monkeypatch: pytest.MonkeyPatch):
    """The AWS_* environment a trainer gets, pointing at the moto server, and a bucket."""
    yield from trainer_s3(monkeypatch)


def test_shards_and_metadata_are_objects_and_load_back(s3):
    uri = "s3://runs/llama/ckpt/step-00000002"
    state = {"w": torch.arange(6.0).reshape(2, 3), "lr": 0.25}
    dcp.save(state, storage_writer=checkpoint.writer(uri))
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="runs", Prefix="llama/ckpt/")["Contents"])
    assert keys == ["llama/ckpt/step-00000002/.metadata", "llama/ckpt/step-00000002/__0_0.distcp"]
    loaded = {"w": torch.zeros(2, 3), "lr": 0.0}
    checkpoint.read_state(loaded, uri)
    assert torch.equal(loaded["w"], state["w"]) and loaded["lr"] == 0.25
