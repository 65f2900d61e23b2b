"""A node-local mirror of a remote folder (common/mirror.py), with a ``file://`` folder as the remote."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainium_trainer.common import mirror


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_a_fresh_node_pulls_everything_but_locks_and_pushes_back_only_what_it_added(tmp_path):
    remote, node = tmp_path / "remote", tmp_path / "node"
    write(remote, {"step-2/.metadata": "m", "step-2/__0_0.distcp": "shard", "locks/x": "held", "a.lock": "held"})
    assert mirror.pull(remote.as_uri(), str(node)) == 2
    assert sorted(mirror.local_sizes(str(node))) == ["step-2/.metadata", "step-2/__0_0.distcp"]
    write(node, {"step-4/.metadata": "m", "step-4/__0_0.distcp": "shard", "step-4/x.lock": "held"})
    assert mirror.push(str(node), remote.as_uri()) == 2
    assert (remote / "step-4" / "__0_0.distcp").read_text() == "shard" and not (remote / "step-4" / "x.lock").exists()
    assert mirror.push(str(node), remote.as_uri()) == 0  # nothing new


def test_only_local_rank_zero_pushes(tmp_path, monkeypatch):
    write(tmp_path / "node", {"f": "x"})
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert mirror.push(str(tmp_path / "node"), (tmp_path / "remote").as_uri()) == 0
    assert not (tmp_path / "remote").exists()


def test_a_file_pruned_while_pushing_is_skipped(tmp_path, monkeypatch):
    """TorchTitan prunes old checkpoints in a thread: a file gone since the walk is not an error."""
    node = tmp_path / "node"
    write(node, {"step-2/a": "x", "step-4/a": "y"})
    walked = mirror.local_sizes(str(node))
    (node / "step-2" / "a").unlink()
    monkeypatch.setattr(mirror, "local_sizes", lambda directory: walked)
    assert mirror.push(str(node), (tmp_path / "remote").as_uri()) == 1
    assert (tmp_path / "remote" / "step-4" / "a").read_text() == "y"


@pytest.mark.parametrize("remote", ["s3://a/ckpt", "s3://b/ckpt"])
def test_each_remote_has_its_own_folder_on_the_node(remote):
    assert mirror.mirror_directory(remote, "titan-checkpoint") != mirror.mirror_directory(
        "s3://c/ckpt", "titan-checkpoint"
    )
    assert mirror.mirror_directory(remote, "x") == mirror.mirror_directory(remote, "x")
