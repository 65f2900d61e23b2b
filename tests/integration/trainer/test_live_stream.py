"""A local run of the Llama pretrain trainer writes its live stream while it runs and logs progress lines.

The job runs through local compute (the container's launcher, torchrun with 2 ranks, the node monitor), so
this is what a task of ``trainium_llama_pretrain`` sees. The job is given far more steps than it can run in
the test, so it cannot end on its own: once the task log shows progress past ``STEPS``, the log sink reads the
stream (chunks first, then the job is found still running, so they were flushed while training went on) and
ends the job, as a cancelled task would.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.neuron.spec import JobSpec
from trainium_trainer.common import stream

STEPS = 30
MAX_STEPS = 100_000  # never reached: the test ends the job once it has seen STEPS steps
PROGRESS = re.compile(
    rf"^\[node 0 rank 0\] .*progress step (\d+)/{MAX_STEPS} \(\d+%\) loss [\d.]+ \| [\d.]+k? tokens/s \| ETA \d+[smh]"
    r".* \| cost so far \$0\.00 \(est\. \$\d+\.\d\d on the instance layout\)$"
)


@pytest.mark.slow
def test_the_stream_is_readable_mid_run_and_the_task_log_shows_progress_with_eta(
    tmp_path: Path, llama_data_uri
) -> None:
    out = (tmp_path / "out").as_uri()
    spec = JobSpec(
        name="llama",
        entry_point="trainium_trainer.llama.train",
        args=(
            "--data-uri",
            llama_data_uri,
            "--preset",
            "tiny",
            "--max-steps",
            str(MAX_STEPS),
            "--log-every",
            "1",
            "--stream-every-s",
            "0",
            "--progress-every-s",
            "0",
        ),
        env={
            "TRAINIUM_RUNTIME": "eager",
            "TRAINIUM_COST_PER_HOUR_USD": "1.34",
            "TRAINIUM_COST_IS_ESTIMATE": "1",
            "TRAINIUM_MONITOR_EVERY_S": "0.5",
            "TRAINIUM_STREAM_EVERY_S": "0",
        },
        processes_per_node=2,
        output_uri=out,
    )
    backend = LocalBackend(tmp_path / "state")
    handle = backend.submit(spec, "live", {})
    seen_while_running: list[dict] = []
    lines: list[str] = []  # the task log until the job is ended

    def sink(line: str) -> None:
        if seen_while_running:
            return  # what the job prints while it is stopped is not the progress under test
        lines.append(line)
        progress = PROGRESS.match(line)
        if progress and int(progress.group(1)) >= STEPS:
            records = stream.read_records(out, "train")
            assert backend.status(handle).state is JobState.RUNNING, "\n".join(lines[-30:])
            seen_while_running.extend(records)
            backend.cancel(handle, "the test has seen its steps")

    status = backend.wait(handle, sink, 600)
    assert seen_while_running, f"no progress line reached step {STEPS}:\n" + "\n".join(lines[-30:])
    assert status.state is JobState.CANCELLED, "\n".join(lines[-30:])
    assert seen_while_running[0]["kind"] == "train" and seen_while_running[0]["total_steps"] == MAX_STEPS
    assert seen_while_running[-1]["step"] >= STEPS - 1  # flushed as it trained: at most the logged step pending

    final = stream.read_records(out, "train")
    train = [r for r in final if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(1, len(train) + 1)) and len(train) >= STEPS - 1
    assert all(r["tokens_per_s"] > 0 and r["mfu"] is None and r["xla_graphs"] == 0 for r in train[1:]), train  # eager
    chunk_names = [c.rsplit("/", 1)[-1] for c in stream.chunks(out, "train")]
    assert chunk_names[0] == "000000.jsonl" and len(chunk_names) >= 2

    progress = [int(m.group(1)) for m in map(PROGRESS.match, lines) if m]
    assert progress == sorted(progress) and progress[-1] >= STEPS, progress
    assert not [line for line in lines if " rank 1]" in line]  # the main rank only
    assert not [line for line in lines if " ERROR " in line]

    host = stream.read_records(out, stream.monitor_source(0), kinds=["host"])
    assert host and all(r["node"] == 0 and r["mem_total_bytes"] > r["mem_used_bytes"] > 0 for r in host)
