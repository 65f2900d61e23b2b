"""TorchTitan's own trainer through ``trainium_trainer.titan.train`` on 2 ranks on gloo (torchrun, as the launcher runs
it): the debug model on the data job's local corpus, our stream and metrics, its DCP checkpoint out as a
Hugging Face directory that ``from_pretrained`` loads and that computes the run's eval loss."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torchtitan")  # the native venv's; the main venv never collects this folder

import torch  # noqa: E402

from tests.integration.native.test_dcp_s3 import s3  # noqa: E402, F401  (the fixture)

REPO = Path(__file__).resolve().parents[3]
STEPS = 6


def launcher(ranks: int, *args: str, tmpdir: Path | None = None, nodes: int = 1, node: int = 0,
             port: int | None = None) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """Node ``node`` of a ``nodes``-node job as local compute starts it: the launcher on this machine with the
    rendezvous contract; ``tmpdir``: the node's temporary folder (a fresh one is a new instance)."""
    env = {**os.environ, "TRAINIUM_STACK": "native", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    if tmpdir is not None:
        tmpdir.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(tmpdir)
    command = [sys.executable, "-m", "trainium_trainer.launch", f"--nodes={nodes}", f"--nproc-per-node={ranks}",
               "--module=trainium_trainer.titan.train",
               "--", *args]  # fmt: skip
    env |= {"TRAINIUM_NUM_NODES": str(nodes), "TRAINIUM_NODE_RANK": str(node), "TRAINIUM_MAIN_ADDR": "127.0.0.1",
            "TRAINIUM_MAIN_PORT": str(port or _free_port())}  # fmt: skip
    return command, env


def torchrun(ranks: int, *args: str, tmpdir: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The launcher of a one-node job on this machine."""
    command, env = launcher(ranks, *args, tmpdir=tmpdir)
    return subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)


def two_nodes(ranks: int, *args: str, tmpdir: Path) -> list[subprocess.CompletedProcess[str]]:
    """A 2-node job as local compute runs it: two launchers on this machine, one temporary folder for both."""
    port = _free_port()
    started = []
    for node in (0, 1):
        command, env = launcher(ranks, *args, tmpdir=tmpdir, nodes=2, node=node, port=port)
        started.append((command, subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE,
                                                  stderr=subprocess.STDOUT, text=True)))  # fmt: skip
    done = []
    for command, process in started:
        try:
            output, _ = process.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            for _, other in started:
                other.kill()
            raise
        done.append(subprocess.CompletedProcess(command, process.returncode, output, ""))
    return done


def _free_port() -> int:
    from tests.conftest import free_port

    return free_port()


def test_torchtitan_trains_the_debug_model_on_two_gloo_ranks_and_exports_hugging_face(tmp_path, llama_data_uri):
    from transformers import AutoModelForCausalLM

    out = tmp_path / "out"
    done = torchrun(2, "--data-uri", llama_data_uri, "--output-uri", str(out), "--flavor", "debugmodel", "--max-steps",
                    str(STEPS), "--batch-size", "4", "--log-every", "1", "--warmup-steps", "2")  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    summary = json.loads((out / "metrics.json").read_text())
    assert summary["trainer"] == "torchtitan" and summary["torchtitan_version"] == "0.2.2"
    assert (summary["world_size"], summary["data_parallel_size"], summary["process_group_backend"]) == (2, 2, "gloo")
    assert summary["steps"] == STEPS and summary["tokens_per_s"] > 0
    train = [r for r in summary["history"] if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(1, STEPS + 1)) and train[-1]["loss"] < train[0]["loss"]
    assert train[-1]["loss"] == pytest.approx(summary["final_loss"], abs=1e-6)
    # TorchTitan's own log printed the same losses our stream holds
    assert f"step:  {STEPS}  loss:  {train[-1]['loss']:.5f}" in done.stdout + done.stderr

    # TorchTitan's checkpoint: DCP shards of both ranks; the job config it ran is ours
    ckpt = out / "titan" / "checkpoint" / f"step-{STEPS}"
    assert {".metadata", "__0_0.distcp", "__1_0.distcp"} <= {p.name for p in ckpt.iterdir()}
    assert 'flavor = "debugmodel"' in (out / "titan" / "job_config.toml").read_text()

    model = AutoModelForCausalLM.from_pretrained(out).eval()
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 256
    blocks = torch.from_numpy(
        np.concatenate([np.load(p) for p in sorted((Path(llama_data_uri) / "eval").glob("*.npy"))])
    )
    with torch.no_grad():
        logits = model(input_ids=blocks.long()).logits.float()
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 blocks[:, 1:].reshape(-1).long())  # fmt: skip
    assert float(loss) == pytest.approx(summary["eval_loss"], abs=1e-4)
    assert float(loss) < train[0]["loss"]  # the exported weights are the trained ones, not the initial ones
    assert (out / "_SUCCESS").exists() and (out / "tokenizer.json").exists()


def test_a_retry_on_a_fresh_node_resumes_from_the_checkpoints_on_s3(tmp_path, llama_data_uri, s3):  # noqa: F811
    """As on ECS or Batch: checkpoints go to an s3:// checkpoint_uri as TorchTitan saves them. The first try is
    cut short after step 2 (its later checkpoint removed, as if killed before saving it); the retry, on a node with
    an empty disk, pulls step 2 and trains on from there."""
    ckpt = "s3://runs/titan/ckpt"
    common = ("--data-uri", llama_data_uri, "--flavor", "debugmodel", "--max-steps", "4", "--batch-size", "2",
              "--log-every", "1", "--warmup-steps", "1", "--checkpoint-every", "2",
              "--checkpoint-uri", ckpt)  # fmt: skip
    first = torchrun(1, *common, "--output-uri", str(tmp_path / "first"), tmpdir=tmp_path / "node-a")
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]

    def steps_on_s3() -> set[str]:
        objects = s3.list_objects_v2(Bucket="runs", Prefix="titan/ckpt/").get("Contents", [])
        return {o["Key"].split("/")[2] for o in objects}

    assert steps_on_s3() == {"step-2", "step-4"}  # each checkpoint pushed as it was saved
    for o in s3.list_objects_v2(Bucket="runs", Prefix="titan/ckpt/step-4/")["Contents"]:
        s3.delete_object(Bucket="runs", Key=o["Key"])

    retry = torchrun(1, *common, "--output-uri", str(tmp_path / "retry"), tmpdir=tmp_path / "node-b")
    assert retry.returncode == 0, (retry.stdout + retry.stderr)[-4000:]
    summary = json.loads((tmp_path / "retry" / "metrics.json").read_text())
    assert (summary["resumed_from_step"], summary["steps"]) == (2, 4)
    assert steps_on_s3() == {"step-2", "step-4"}


def test_two_nodes_push_their_own_shards_and_rank_0_exports_them_all(tmp_path, llama_data_uri, s3):  # noqa: F811
    """A 2-node job with an s3:// checkpoint_uri, as on Batch, run by local compute: two launchers of one rank
    each on this machine, sharing its temporary folder. Each node mirrors into its own folder as on its own
    instance, so node 1's shards reach S3 because node 1 pushed them, and rank 0's model holds them because it
    pulled them; a retry of the job cut after its first checkpoint resumes from it."""
    from transformers import AutoModelForCausalLM

    ckpt = "s3://runs/titan/two-nodes"
    common = ("--data-uri", llama_data_uri, "--flavor", "debugmodel", "--max-steps", "4", "--batch-size", "2",
              "--log-every", "1", "--warmup-steps", "1", "--checkpoint-every", "2",
              "--checkpoint-uri", ckpt)  # fmt: skip
    machine, out = tmp_path / "machine-a", tmp_path / "first"
    first = two_nodes(1, *common, "--output-uri", str(out), tmpdir=machine)
    for node, done in enumerate(first):
        assert done.returncode == 0, f"node {node}: {done.stdout[-4000:]}"

    def on_s3() -> set[str]:
        objects = s3.list_objects_v2(Bucket="runs", Prefix="titan/two-nodes/").get("Contents", [])
        return {o["Key"].split("/", 2)[2] for o in objects}

    shards = {f"step-{n}/{name}" for n in (2, 4) for name in (".metadata", "__0_0.distcp", "__1_0.distcp")}
    assert on_s3() == shards

    # one mirror per node, though both ran under one temporary folder, as on separate instances: rank 0 had only
    # its own shards until it pulled node 1's from S3 for the export, and node 1's mirror holds only its rank's
    assert "mirror: pulled 2 file(s)" in first[0].stdout, first[0].stdout[-4000:]
    configs = [(out / "titan" / name).read_text() for name in ("job_config.toml", "job_config.node1.toml")]
    folders = [Path(re.search(r'^folder = "(.*)"$', text, re.M)[1]) for text in configs]
    assert len(set(folders)) == 2 and all(f.parent == machine / "trainium-titan-checkpoint" for f in folders)
    assert mirror_files(folders[1]) == {"step-2/__1_0.distcp", "step-4/__1_0.distcp"}
    assert {"step-4/.metadata", "step-4/__0_0.distcp", "step-4/__1_0.distcp"} <= mirror_files(folders[0])

    summary = json.loads((out / "metrics.json").read_text())
    assert (summary["world_size"], summary["data_parallel_size"], summary["steps"]) == (2, 2, 4)
    assert summary["resumed_from_step"] is None and (out / "_SUCCESS").exists()
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.num_hidden_layers == 6

    # the retry, on fresh instances, after a first try cut short after step 2
    for key in {k for k in on_s3() if k.startswith("step-4/")}:
        s3.delete_object(Bucket="runs", Key=f"titan/two-nodes/{key}")
    retry = two_nodes(1, *common, "--output-uri", str(tmp_path / "retry"), tmpdir=tmp_path / "machine-b")
    for node, done in enumerate(retry):
        assert done.returncode == 0, f"node {node}: {done.stdout[-4000:]}"
    summary = json.loads((tmp_path / "retry" / "metrics.json").read_text())
    assert (summary["resumed_from_step"], summary["steps"]) == (2, 4)
    assert on_s3() == shards


def mirror_files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
