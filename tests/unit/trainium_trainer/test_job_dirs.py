"""A user's job in the launcher: the local folders, and how they mirror to the job's URIs."""

from __future__ import annotations

import os

import pytest

from trainium_trainer import boundary, job_dirs


def test_node_folders_and_which_node_keeps_files(tmp_path):
    env = {boundary.ENV_JOB_DIR: str(tmp_path), boundary.ENV_OUTPUT_URI: "s3://b/out/",
           boundary.ENV_CHECKPOINT_URI: "s3://b/ckpt", "PYTHONPATH": "/opt/trainium"}  # fmt: skip
    main, other = job_dirs.job_dirs(env, 0), job_dirs.job_dirs(env, 1)
    assert main.uploads and not other.uploads and other.remote(other.output_uri) == "s3://b/out"
    every = job_dirs.job_dirs(env, 1, all_nodes=True)
    assert every.uploads and every.remote(every.checkpoint_uri) == "s3://b/ckpt/node-1"
    added = main.environment(env)
    assert added["PYTHONPATH"].split(os.pathsep) == [str(tmp_path / "code"), "/opt/trainium"]
    assert added[boundary.ENV_OUTPUT_DIR] == str(tmp_path / "output")


def test_a_relative_path_naming_a_bundle_file_is_resolved_in_the_code_folder(tmp_path):
    dirs = job_dirs.job_dirs({boundary.ENV_JOB_DIR: str(tmp_path)}, 0)
    (dirs.code / "configs").mkdir(parents=True)
    (dirs.code / "configs" / "run.yaml").write_text("x")
    assert job_dirs.in_code_folder("configs/run.yaml", dirs) == str(dirs.code / "configs" / "run.yaml")
    for word in ("--lr", "missing.py", "/abs/path.py", "key=configs/run.yaml"):
        assert job_dirs.in_code_folder(word, dirs) == word


def test_a_running_mirror_uploads_only_files_that_held_still_and_mirrors_deletions(tmp_path):
    local, remote = tmp_path / "local", tmp_path / "remote"
    (local / "ckpt-1").mkdir(parents=True)
    (local / "ckpt-1" / "model.pt").write_bytes(b"one")
    mirror = job_dirs.Mirror(local, remote.as_uri())
    assert mirror.sync() == 0  # first seen: it may still be being written
    assert mirror.sync() == 1 and (remote / "ckpt-1" / "model.pt").read_bytes() == b"one"
    assert mirror.sync() == 0  # nothing changed since
    (local / "ckpt-1" / "model.pt").unlink()
    (local / "ckpt-2.pt").write_bytes(b"two")
    assert mirror.sync(final=True) == 1  # the last upload takes everything
    assert (remote / "ckpt-2.pt").read_bytes() == b"two" and not (remote / "ckpt-1" / "model.pt").exists()
    assert not list(remote.rglob("*.part"))


def test_restore_skips_what_the_provider_and_monitor_write(tmp_path):
    remote = tmp_path / "remote"
    for name in ("trainer_output/checkpoint-2/model.safetensors", "stream/train/000000.jsonl",
                 ".trainium/log-cursor-x.json"):  # fmt: skip
        (remote / name).parent.mkdir(parents=True, exist_ok=True)
        (remote / name).write_text("x")
    into = tmp_path / "local"
    assert job_dirs.download(remote.as_uri(), into, (boundary.STREAM_DIR,)) == 1
    assert [p.relative_to(into).as_posix() for p in into.rglob("*") if p.is_file()] == [
        "trainer_output/checkpoint-2/model.safetensors"
    ]


def test_an_incomplete_code_bundle_is_refused(tmp_path):
    (tmp_path / "bundle").mkdir()
    env = {boundary.ENV_JOB_DIR: str(tmp_path / "job"), boundary.ENV_CODE_URI: (tmp_path / "bundle").as_uri()}
    with pytest.raises(FileNotFoundError, match="incomplete"):
        job_dirs.prepare(job_dirs.job_dirs(env, 0), log=lambda line: None)
