"""What each node of a multi-node TorchTitan job keeps to itself on a machine it may share with the others (local
compute runs a job's nodes as launchers on one machine, under one temporary folder and one output folder): its
checkpoint mirror and its job config file."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainium_trainer.common import mirror
from trainium_trainer.titan import train


@pytest.mark.parametrize(
    ("env", "node"),
    [
        ({"GROUP_RANK": "1", "TRAINIUM_NODE_RANK": "1"}, 1),  # torchrun's rank of the node, in every rank
        ({"TRAINIUM_NODE_RANK": "2"}, 2),  # the launcher's contract (local compute sets it)
        ({"AWS_BATCH_JOB_NODE_INDEX": "3"}, 3),  # Batch's own, which the launcher maps but does not export
        ({}, 0),
    ],
)
def test_the_node_index_comes_from_torchrun_the_launcher_contract_or_batch(env, node):
    assert mirror.node_index(env) == node


def test_two_nodes_under_one_temporary_folder_mirror_a_checkpoint_uri_into_two_folders(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() reads TMPDIR again
    uri = "s3://runs/titan/ckpt"
    folders = set()
    for node in ("0", "1"):
        monkeypatch.setenv("GROUP_RANK", node)
        folder = mirror.mirror_directory(uri, "titan-checkpoint")
        assert folder == mirror.mirror_directory(uri, "titan-checkpoint", int(node))
        folders.add(folder)
    assert len(folders) == 2 and all(Path(f).parent == tmp_path / "trainium-titan-checkpoint" for f in folders)
    monkeypatch.setenv("GROUP_RANK", "0")
    assert mirror.mirror_directory("s3://runs/other", "titan-checkpoint") not in folders


def test_each_node_has_its_own_job_config_file_node_0_the_usual_one(tmp_path):
    assert train.config_file(tmp_path, 0) == tmp_path / "job_config.toml"
    assert len({train.config_file(tmp_path, n) for n in range(4)}) == 4
