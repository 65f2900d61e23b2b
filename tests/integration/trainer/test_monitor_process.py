"""The node monitor as the launcher runs it: a process that ends on SIGTERM or when its parent is gone."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from trainium_trainer.common import stream

REPO = Path(__file__).resolve().parents[3]


def env_without_neuron_monitor() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PATH": str(Path(sys.executable).parent)}


def wait_for_chunk(out: Path, process: subprocess.Popen | None = None, timeout: float = 60) -> None:
    """Poll until the monitor wrote a chunk (the timeout only keeps a broken monitor from hanging the test)."""
    deadline = time.monotonic() + timeout
    while not stream.chunks(str(out), stream.monitor_source(0)):
        assert process is None or process.poll() is None, "the monitor ended before its first sample"
        assert time.monotonic() < deadline, "the monitor wrote nothing"
        time.sleep(0.05)


def test_sigterm_ends_the_monitor_cleanly_with_what_it_buffered(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "trainium_trainer.common.monitor", f"--output-uri={tmp_path}", "--node=0",
               "--every-s=0.1", "--stream-every-s=0"]  # fmt: skip
    monitor = subprocess.Popen(command, env=env_without_neuron_monitor(), stderr=subprocess.PIPE, text=True)
    try:
        wait_for_chunk(tmp_path, monitor)
    finally:
        monitor.send_signal(signal.SIGTERM)
        _, err = monitor.communicate(timeout=30)
    assert monitor.returncode == 0 and "WARNING" not in err and "ERROR" not in err
    records = stream.read_records(str(tmp_path), stream.monitor_source(0))
    assert records and {r["kind"] for r in records} == {"host"}


PARENT = """
import subprocess, sys
monitor = subprocess.Popen([sys.executable, "-m", "trainium_trainer.common.monitor", "--output-uri=" + sys.argv[1],
                            "--node=0", "--every-s=0.1", "--stream-every-s=0", f"--parent={__import__('os').getpid()}"])
print(monitor.pid, flush=True)
sys.stdin.readline()  # the test says when to end, as torchrun ends
"""


def test_the_monitor_stops_when_its_parent_ends(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], env=env_without_neuron_monitor(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    pid = int(parent.stdout.readline())
    ended = False
    try:
        wait_for_chunk(tmp_path)
        parent.communicate("\n", timeout=30)  # the parent exits; the monitor is reparented
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z":
            assert time.monotonic() < deadline, "the monitor outlived its parent"
            time.sleep(0.05)
        ended = True
    finally:
        if not ended:  # the test failed: leave nothing behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


#: The job: one process that runs until its node's monitor has written a chunk (a job runs far longer than the
#: monitor takes to start), or fails after 30 s without one.
UNTIL_MONITORED = """
import pathlib, sys, time
chunks = pathlib.Path(sys.argv[1]) / "stream" / "monitor-node0"
deadline = time.monotonic() + 30
while not list(chunks.glob("*.jsonl")):
    if time.monotonic() > deadline:
        sys.exit("no node monitor records")
    time.sleep(0.05)
"""


def test_a_single_process_local_job_leaves_node_monitor_records(tmp_path: Path) -> None:
    """``distributed=False``: the launcher runs the one process without torchrun and starts the sampler next to it."""
    from airflow_provider_trainium.compute.base import JobState
    from airflow_provider_trainium.compute.local.backend import LocalBackend
    from airflow_provider_trainium.neuron.spec import JobSpec

    out = tmp_path / "out"
    every = {"TRAINIUM_MONITOR_EVERY_S": "0.1", "TRAINIUM_STREAM_EVERY_S": "0"}
    spec = JobSpec(name="one", command=("python", "-c", UNTIL_MONITORED), args=(str(out),), distributed=False,
                   output_uri=out.as_uri(), env=every)  # fmt: skip
    backend = LocalBackend(tmp_path / "state", max_processes_per_node=2)
    lines: list[str] = []
    status = backend.wait(backend.submit(spec, "one", {}), lines.append, 300)
    assert status.state is JobState.SUCCEEDED, "\n".join(lines)
    records = stream.read_records(out.as_uri(), stream.monitor_source(0))
    assert records and {(r["kind"], r["node"]) for r in records} == {("host", 0)}
