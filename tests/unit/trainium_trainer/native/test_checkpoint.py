"""DCP checkpoints read without running code from the checkpoint URI, and the pointer's checks."""

from __future__ import annotations

import json
import os
import pickle

import pytest
import torch
import torch.distributed.checkpoint as dcp

from trainium_trainer.common.checkpoint import CheckpointError
from trainium_trainer.native import checkpoint


class Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def saved(tmp_path) -> str:
    """A one-process DCP checkpoint with a tensor and plain data, as the optimizer's groups are."""
    path = str(tmp_path / "step-00000003")
    dcp.save({"w": torch.arange(4.0), "lr": 0.5, "betas": (0.9, 0.95)}, storage_writer=dcp.FileSystemWriter(path))
    return path


def test_plain_data_and_tensors_load(tmp_path):
    path = saved(tmp_path)
    state = {"w": torch.zeros(4), "lr": 0.0, "betas": (0.0, 0.0)}
    checkpoint.read_state(state, path)
    assert torch.equal(state["w"], torch.arange(4.0)) and state["lr"] == 0.5 and state["betas"] == (0.9, 0.95)


def test_metadata_naming_any_other_callable_is_refused(tmp_path):
    path = saved(tmp_path)
    with open(os.path.join(path, ".metadata"), "wb") as fh:
        pickle.dump(Boom(), fh)
    with pytest.raises(CheckpointError, match=r"posix\.system|os\.system"):
        checkpoint.reader(path)


def test_an_entry_that_is_more_than_plain_data_is_refused(tmp_path):
    # DCP itself would torch.load this entry with weights_only=False, running os.system
    evil = str(tmp_path / "evil")
    dcp.save({"w": torch.arange(4.0), "lr": Boom(), "betas": (0.9, 0.95)}, storage_writer=dcp.FileSystemWriter(evil))
    state = {"w": torch.zeros(4), "lr": 0.0, "betas": (0.0, 0.0)}
    with pytest.raises(CheckpointError, match="'lr' is more than plain data"):
        checkpoint.read_state(state, evil)


def test_pointer(tmp_path):
    assert checkpoint.latest(str(tmp_path)) is None and checkpoint.latest(None) is None
    (tmp_path / "latest.json").write_text(json.dumps({"step": 8, "dir": "step-00000008"}))
    assert checkpoint.latest(str(tmp_path)) == 8
    for bad in ({"step": 8, "dir": "../elsewhere"}, {"step": True, "dir": "step-00000001"}, [8], {"step": -1}):
        (tmp_path / "latest.json").write_text(json.dumps(bad))
        with pytest.raises(CheckpointError, match="latest.json"):
            checkpoint.latest(str(tmp_path))
