"""A user's job in the launcher: ``--command`` argv, the local folders, and how they mirror to the job's URIs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_provider_trainium.code_bundle import CodeBundleError, bundle_hash, upload_bundle
from airflow_provider_trainium.neuron.container_contract import launcher_arguments
from airflow_provider_trainium.neuron.spec import JobSpec, JobSpecError
from trainium_trainer import boundary, job_dirs
from trainium_trainer.launch import LaunchError, build_command

ENV = {boundary.ENV_NUM_NODES: "2", boundary.ENV_NODE_RANK: "1", boundary.ENV_MAIN_ADDR: "10.0.0.5"}


def test_a_command_runs_under_torchrun_without_python_and_with_this_interpreter():
    command = build_command(["--nodes=2", "--nproc-per-node=4", "--command", "--user-code", "--", "python",
                             "train.py", "--lr", "0.1"], ENV, python="/venv/bin/python")  # fmt: skip
    assert command[:3] == ["/venv/bin/python", "-m", "torch.distributed.run"]
    assert command[command.index("--no-python") :] == ["--no-python", "/venv/bin/python", "train.py", "--lr", "0.1"]
    assert "--module" not in command and "--node_rank=1" in command


def test_a_single_process_command_is_run_as_it_is():
    command = build_command(["--nodes=1", "--single-process", "--command", "--", "bash", "run.sh"], {})
    assert command == ["bash", "run.sh"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes=1", "--single-process"], "--module (or --command) is required"),
        (["--nodes=1", "--single-process", "--command", "--"], "--command needs the command after --"),
    ],
)
def test_a_launch_without_anything_to_run_is_refused(argv, message):
    with pytest.raises(LaunchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_command(argv, {})


def test_the_spec_sends_a_users_command_and_marks_user_code():
    spec = JobSpec(name="j", command=("python", "train.py"), args=("--epochs", "2"), instance_type="trn1.2xlarge")
    assert launcher_arguments(spec) == ["--nodes=1", "--nproc-per-node=2", "--user-code", "--command", "--",
                                        "python", "train.py", "--epochs", "2"]  # fmt: skip
    project = JobSpec(name="j", entry_point="trainium_trainer.mnist_mlp.train", instance_type="trn1.2xlarge")
    assert "--user-code" not in launcher_arguments(project)  # the project's trainers write to their URIs
    every = spec.with_changes(all_nodes_outputs=True)
    assert "--all-nodes-outputs" in launcher_arguments(every)


def test_a_spec_names_a_module_or_a_command_not_both():
    with pytest.raises(JobSpecError, match="either entry_point"):
        JobSpec(name="j", entry_point="m", command=("python", "x.py")).validate()
    with pytest.raises(JobSpecError, match="dotted Python module"):
        JobSpec(name="j").validate()


def test_later_fields_stay_out_of_an_older_specs_hash():
    spec = JobSpec(name="j", entry_point="trainium_trainer.allreduce")
    assert not {"command", "code_uri", "secrets", "all_nodes_outputs"} & set(spec.to_dict())
    assert JobSpec.from_dict(spec.to_dict()) == spec
    user = JobSpec(name="j", command=("python", "t.py"), code_uri="s3://b/code/1", secrets={"T": "ssm:/t"})
    assert JobSpec.from_dict(user.to_dict()) == user and user.content_hash() != spec.content_hash()


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


def test_a_bundle_is_uploaded_once_by_content_and_skips_caches(tmp_path):
    code = tmp_path / "code"
    (code / "__pycache__").mkdir(parents=True)
    (code / "train.py").write_text("print(1)")
    (code / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0")
    root = (tmp_path / "artifacts").as_uri()
    uri = upload_bundle(code, root, None)
    assert uri == f"{root}/code/{bundle_hash(code)}"
    shipped = Path(uri.removeprefix("file://"))
    assert sorted(p.name for p in shipped.rglob("*") if p.is_file()) == [boundary.CODE_BUNDLE_MARKER, "train.py"]
    written = (shipped / "train.py").stat().st_mtime_ns
    assert upload_bundle(code, root, None) == uri  # a complete, unchanged bundle is not written again
    assert (shipped / "train.py").stat().st_mtime_ns == written
    (code / "train.py").write_text("print(2)")
    assert upload_bundle(code, root, None) != uri  # new code, new bundle (and a new spec hash)


def test_a_symlink_in_code_dir_is_refused(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "link.py").symlink_to("/etc/hostname")
    with pytest.raises(CodeBundleError, match="symlink"):
        bundle_hash(tmp_path / "code")
