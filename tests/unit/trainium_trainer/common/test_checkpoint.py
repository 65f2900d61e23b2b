"""Checkpoints load only plain data from the file ``latest.json`` names, unchanged since it was written."""

import hashlib
import io
import json
import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from trainium_trainer.common.checkpoint import (
    CheckpointError,
    load_latest_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from trainium_trainer.common.errors import BadInputError


def training_state() -> dict:
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3, "step": 7}


def draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def test_round_trip_restores_tensors_counters_and_every_rng(tmp_path):
    uri = tmp_path.as_uri()
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    draws()  # move every generator off its seed
    state = {**training_state(), "rng": rng_state()}
    expected = draws()
    save_checkpoint(uri, 7, state)

    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    loaded = load_latest_checkpoint(uri)
    assert loaded["epoch"] == 3 and loaded["step"] == 7
    for key, value in state["model"].items():
        assert torch.equal(loaded["model"][key], value)
    momentum = loaded["optimizer"]["state"][0]["momentum_buffer"]
    assert torch.equal(momentum, state["optimizer"]["state"][0]["momentum_buffer"])
    set_rng_state(loaded["rng"])
    assert draws() == expected


def test_pointer_records_the_file_and_its_sha256_and_old_files_go(tmp_path):
    for step in (10, 20, 30):
        save_checkpoint(tmp_path.as_uri(), step, {"step": step}, keep_last=2)
    pointer = json.loads((tmp_path / "latest.json").read_text())
    data = (tmp_path / "step-00000030.pt").read_bytes()
    assert pointer == {"step": 30, "file": "step-00000030.pt", "sha256": hashlib.sha256(data).hexdigest()}
    assert sorted(p.name for p in tmp_path.glob("step-*.pt")) == ["step-00000020.pt", "step-00000030.pt"]
    assert load_latest_checkpoint(tmp_path.as_uri())["step"] == 30


def test_no_pointer_means_no_checkpoint(tmp_path):
    assert load_latest_checkpoint(tmp_path.as_uri()) is None
    assert load_latest_checkpoint(None) is None


class RunsCode:
    """Pickles as a call to ``os.system``: unpickling it with ``weights_only=False`` runs the command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def plant(directory: Path, name: str, data: bytes, step: int = 1) -> None:
    (directory / name).write_bytes(data)
    pointer = {"step": step, "file": name, "sha256": hashlib.sha256(data).hexdigest()}
    (directory / "latest.json").write_text(json.dumps(pointer))


def test_a_planted_pickle_that_runs_code_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    buffer = io.BytesIO()
    torch.save({"step": 1, "model": {}, "payload": RunsCode(marker)}, buffer)
    checkpoints = tmp_path / "ckpt"
    checkpoints.mkdir()
    plant(checkpoints, "step-00000001.pt", buffer.getvalue())  # pointer and checksum match: only the content is bad

    with pytest.raises(CheckpointError, match="more than tensors and plain data"):
        load_latest_checkpoint(checkpoints.as_uri())
    assert not marker.exists()


@pytest.mark.parametrize(
    "name",
    [
        "../outside/step-00000001.pt",
        "sub/step-00000001.pt",
        "/etc/passwd",
        "step-1.pt",
        "step-00000002.pt",  # another step than the pointer's
        "step-00000001.pt.bak",
    ],
)
def test_a_pointer_outside_the_strict_format_is_refused(tmp_path, name):
    outside = tmp_path / "outside"
    outside.mkdir()
    checkpoints = tmp_path / "ckpt"
    checkpoints.mkdir()
    buffer = io.BytesIO()
    torch.save({"step": 1}, buffer)
    (outside / "step-00000001.pt").write_bytes(buffer.getvalue())
    pointer = {"step": 1, "file": name, "sha256": hashlib.sha256(buffer.getvalue()).hexdigest()}
    (checkpoints / "latest.json").write_text(json.dumps(pointer))

    with pytest.raises(CheckpointError, match="'file' must be 'step-00000001.pt'"):
        load_latest_checkpoint(checkpoints.as_uri())


@pytest.mark.parametrize(
    "pointer",
    [
        {"step": 1, "file": "step-00000001.pt"},  # written before checksums
        {"step": 1, "file": "step-00000001.pt", "sha256": "abc"},
        {"step": "1", "file": "step-00000001.pt", "sha256": "0" * 64},
        ["step-00000001.pt"],
    ],
)
def test_a_malformed_pointer_is_refused(tmp_path, pointer):
    (tmp_path / "latest.json").write_text(json.dumps(pointer))
    with pytest.raises(CheckpointError):
        load_latest_checkpoint(tmp_path.as_uri())


def test_a_checkpoint_changed_after_it_was_written_fails_its_sha256(tmp_path):
    save_checkpoint(tmp_path.as_uri(), 5, training_state())
    path = tmp_path / "step-00000005.pt"
    tampered = bytearray(path.read_bytes())
    tampered[len(tampered) // 2] ^= 0xFF
    path.write_bytes(bytes(tampered))

    with pytest.raises(CheckpointError, match="sha256 .* records"):
        load_latest_checkpoint(tmp_path.as_uri())


def test_checkpoint_errors_are_bad_input_so_the_job_is_not_retried():
    assert issubclass(CheckpointError, BadInputError)
