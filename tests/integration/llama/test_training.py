"""The Llama trainer, ``tiny`` preset, on torch-xla CPU with 2 ranks through local compute.

One sequence of real runs: a compile trial fills the XLA cache; the full run after it compiles nothing
new and its loss falls; a run killed after a checkpoint is rerun and ends where the uninterrupted run did.
"""

import json
from pathlib import Path

import pytest

from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.neuron.spec import JobSpec
from trainium_trainer.common.stream import read_records

STEPS = 40
#: Resumed vs uninterrupted final loss. Both runs execute the same XLA graphs on the same inputs with the
#: same optimizer state, so they agree to float32 rounding; 1e-4 leaves room for nothing else.
RESUME_TOLERANCE = 1e-4


def spec_for(tmp_path: Path, llama_data_uri: str, out: str, *extra: str) -> JobSpec:
    return JobSpec(
        name="llama",
        entry_point="trainium_trainer.llama.train",
        args=(
            "--data-uri",
            llama_data_uri,
            "--max-steps",
            str(STEPS),
            "--log-every",
            "10",
            "--checkpoint-every",
            "10",
            "--compile-cache-uri",
            (tmp_path / "cache").as_uri(),
            *extra,
        ),  # fmt: skip
        # the provider sets the peak only on Trainium; set here, the MFU route is exercised on the CPU
        env={"TRAINIUM_RUNTIME": "xla", "PJRT_DEVICE": "CPU"},
        processes_per_node=2,
        output_uri=(tmp_path / out).as_uri(),
    )


def run(backend: LocalBackend, spec: JobSpec, name: str, on_line=None) -> tuple[JobState, list[str]]:
    lines: list[str] = []
    handle = backend.submit(spec, name, {})

    def log(line: str) -> None:
        lines.append(line)
        if on_line is not None:
            on_line(line, handle)

    status = backend.wait(handle, log, 900)
    return status.state, lines


def metrics(tmp_path: Path, out: str) -> dict:
    return json.loads((tmp_path / out / "metrics.json").read_text())


@pytest.mark.slow
def test_compile_then_train_then_kill_and_resume(tmp_path, llama_data_uri):
    backend = LocalBackend(tmp_path / "state")

    state, lines = run(
        backend, spec_for(tmp_path, llama_data_uri, "trial", "--compile-only", "--max-steps", "10"), "trial"
    )
    assert state is JobState.SUCCEEDED, "\n".join(lines[-30:])
    trial = metrics(tmp_path, "trial")
    assert trial["xla_compilations"] > 0 and trial["xla_cache_missing"] == trial["xla_compilations"]

    full_ckpt = ("--checkpoint-uri", (tmp_path / "ckpt-full").as_uri())
    state, lines = run(backend, spec_for(tmp_path, llama_data_uri, "full", *full_ckpt), "full")
    assert state is JobState.SUCCEEDED, "\n".join(lines[-30:])
    full = metrics(tmp_path, "full")
    assert full["runtime"] == "xla" and full["world_size"] == 2 and full["steps"] == STEPS
    assert full["xla_cache_missing"] == 0, "the compile trial must produce every graph training needs"
    # 2 ranks on torch-xla CPU: forward + backward, then (after the gradients crossed gloo) the update. Logging,
    # checkpoints and the data feed run no graph of their own.
    assert full["xla_train_graphs_run"] == 2 * STEPS
    losses = [h["loss"] for h in full["history"]]
    assert losses[-1] < losses[0] - 1.0, losses
    # local compute runs on this CPU: the container plan gives no Trainium peak, so no MFU in either record
    assert full["peak_flops"] is None and full["mfu"] is None and full["tokens_per_s"] > 0
    # each logged step recorded once: the summary's history is the stream's train records
    streamed = read_records((tmp_path / "full").as_uri(), "train", kinds=["train"])
    assert full["history"] == streamed and [r["step"] for r in streamed] == [10, 20, 30, 40]
    assert all(r["mfu"] is None for r in streamed) and all(r["tokens_per_s"] > 0 for r in streamed[1:])
    assert sorted(p.name for p in (tmp_path / "ckpt-full").glob("step-*.pt")) == [
        "step-00000030.pt", "step-00000040.pt"]  # keep the last 2  # fmt: skip
    for name in ("model.safetensors", "config.json", "tokenizer.json", "metrics.json", "_SUCCESS"):
        assert (tmp_path / "full" / name).exists(), name

    killed_ckpt = ("--checkpoint-uri", (tmp_path / "ckpt-killed").as_uri())

    def kill_after_first_checkpoint(line: str, handle) -> None:
        if "checkpoint step 10 ->" in line:
            backend.cancel(handle, "test: kill after the first checkpoint")

    state, lines = run(backend, spec_for(tmp_path, llama_data_uri, "killed", *killed_ckpt), "killed",
                       kill_after_first_checkpoint)  # fmt: skip
    assert state is not JobState.SUCCEEDED
    assert not (tmp_path / "killed" / "_SUCCESS").exists()
    saved = json.loads((tmp_path / "ckpt-killed" / "latest.json").read_text())["step"]
    assert 10 <= saved < STEPS

    state, lines = run(backend, spec_for(tmp_path, llama_data_uri, "killed", *killed_ckpt), "resumed")
    assert state is JobState.SUCCEEDED, "\n".join(lines[-30:])
    resumed = metrics(tmp_path, "killed")
    assert resumed["resumed_from_step"] == saved and resumed["steps"] == STEPS
    print(
        f"resume check: killed after step {saved}; final loss uninterrupted {full['final_loss']}, "
        f"resumed {resumed['final_loss']}; eval loss {full['eval_loss']} vs {resumed['eval_loss']}"
    )
    assert resumed["final_loss"] == pytest.approx(full["final_loss"], abs=RESUME_TOLERANCE)
    assert resumed["eval_loss"] == pytest.approx(full["eval_loss"], abs=RESUME_TOLERANCE)
