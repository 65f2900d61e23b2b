"""Local compute runs real processes: torchrun agents over loopback, killed as a tree."""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_provider_trainium.compute.base import JobHandle, JobState
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.neuron.spec import JobSpec


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


#: How often a test looks again for what a job's processes write (pid files, start lines): short next to a
#: process start (~1 s here), long enough not to spin a core that the job itself needs.
POLL_S = 0.05
#: A job's processes start within seconds; this bound only turns a hang into a failure that says what.
START_S = 120.0


def wait_for(done: Callable[[], bool], what: str, still: Callable[[], None] = lambda: None) -> None:
    """Look at ``done`` every ``POLL_S`` until it holds; ``still`` asserts what must hold meanwhile (the job
    still runs). Fails naming ``what`` after ``START_S``."""
    deadline = time.monotonic() + START_S
    while not done():
        still()
        assert time.monotonic() < deadline, f"{what}: not within {START_S:.0f} s"
        time.sleep(POLL_S)


def started_lines(work: Path) -> list[str]:
    """The ``count_runs`` job's start lines, one per rank start."""
    return (work / "started").read_text().splitlines() if (work / "started").exists() else []


def running(backend: LocalBackend, handle: JobHandle) -> Callable[[], None]:
    def check() -> None:
        assert backend.status(handle).state is JobState.RUNNING

    return check


@pytest.fixture
def backend(tmp_path):
    return LocalBackend(tmp_path / "state", max_processes_per_node=2)


def run(backend, spec, timeout=300.0):
    lines: list[str] = []
    handle = backend.submit(spec, "job-1", {})
    status = backend.wait(handle, lines.append, timeout)
    return handle, status, lines


def test_two_nodes_of_two_ranks_see_batch_style_environment(backend, tmp_path):
    out = tmp_path / "out"
    spec = JobSpec(name="t", entry_point="tests.integration.jobs.report_env", args=(str(out),),
                   instance_type="trn1.32xlarge", nodes=2, output_uri="file:///tmp/o")  # fmt: skip
    handle, status, lines = run(backend, spec)
    assert status.state is JobState.SUCCEEDED, status
    ranks = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in out.glob("rank-*.json")}
    assert sorted(ranks) == [0, 1, 2, 3]
    for rank, env in ranks.items():
        node = rank // 2
        assert env["WORLD_SIZE"] == "4" and env["LOCAL_RANK"] == str(rank % 2)
        # the neutral rendezvous, set directly: local compute fakes no platform's variables
        assert env["TRAINIUM_NUM_NODES"] == "2" and env["TRAINIUM_NODE_RANK"] == str(node)
        assert env["TRAINIUM_MAIN_ADDR"] == "127.0.0.1" and env["AWS_BATCH_JOB_NUM_NODES"] is None
        assert env["TRAINIUM_OUTPUT_URI"] == "file:///tmp/o" and env["MALLOC_ARENA_MAX"] == "64"
    # Only the main rank goes to the task log; every rank's lines stay in its node's log file.
    assert "[node 0 rank 0] hello from rank 0" in lines
    assert not [line for line in lines if " rank 1]" in line or " rank 2]" in line or " rank 3]" in line]
    node_logs = "".join((tmp_path / "state" / "jobs" / handle.job_id / f"node{n}.log").read_text() for n in (0, 1))
    for rank in range(4):
        assert f"hello from rank {rank}" in node_logs
    assert backend.find_existing("job-1", {}).job_id == handle.job_id  # success is remembered


def test_failing_rank_fails_the_job_with_its_own_last_lines_and_kills_the_rest(backend, tmp_path):
    pids = tmp_path / "pids"
    spec = JobSpec(name="t", entry_point="tests.integration.jobs.fail_rank", args=("3", "65", str(pids)),
                   instance_type="trn1.32xlarge", nodes=2)  # fmt: skip
    _, status, _ = run(backend, spec)
    assert status.state is JobState.FAILED
    assert status.exit_code == 65
    assert "node 1 rank 3" in status.reason
    # torchrun tails a rank's stdout and stderr separately, so their relative order is not kept
    assert "rank 3 gives up: bad record 42" in status.log_tail
    assert all("rank 3" in line for line in status.log_tail)
    for pid_file in pids.glob("*.pid"):
        assert not alive(int(pid_file.read_text())), f"rank {pid_file.stem} still running"
    assert backend.find_existing("job-1", {}) is None


def test_timeout_kills_the_whole_tree(backend, tmp_path):
    pids = tmp_path / "pids"
    spec = JobSpec(name="t", entry_point="tests.integration.jobs.fail_rank", args=("99", "0", str(pids)), nodes=1)
    handle = backend.submit(spec, "job-1", {})
    wait_for(lambda: len(list(pids.glob("*.pid"))) >= 2, "both ranks running", running(backend, handle))
    status = backend.wait(handle, lambda line: None, timeout_seconds=1)
    assert status.state is JobState.FAILED and "timed out" in status.reason
    assert not any(alive(int(p.read_text())) for p in pids.glob("*.pid"))


def test_cancel_kills_processes_of_a_submitted_job(backend, tmp_path):
    pids = tmp_path / "pids"
    spec = JobSpec(
        name="t", entry_point="tests.integration.jobs.fail_rank", args=("99", "0", str(pids)), distributed=False
    )
    handle = backend.submit(spec, "job-1", {})
    wait_for(lambda: bool(list(pids.glob("*.pid"))), "the job's process started", running(backend, handle))
    pid = int(next(pids.glob("*.pid")).read_text())
    backend.cancel(handle, "test")
    assert not alive(pid)


def test_orphans_of_a_previous_worker_are_stopped_before_a_new_try(tmp_path):
    pids = tmp_path / "pids"
    spec = JobSpec(
        name="t", entry_point="tests.integration.jobs.fail_rank", args=("99", "0", str(pids)), distributed=False
    )
    first = LocalBackend(tmp_path / "state").submit(spec, "job-1", {})
    wait_for(lambda: bool(list(pids.glob("*.pid"))), "the first worker's job started")
    orphan = int(next(pids.glob("*.pid")).read_text())
    second = LocalBackend(tmp_path / "state")  # a new worker process after a restart
    handle = second.submit(spec, "job-1", {})
    assert not alive(orphan)
    assert handle.job_id != first.job_id
    second.cancel(handle, "test")


def test_processes_per_node_are_capped_on_this_machine(backend):
    big = JobSpec(name="t", entry_point="x.y", instance_type="trn1.32xlarge")
    assert backend.local_spec(big).nproc_per_node == 2


def test_a_succeeded_job_is_remembered_with_the_spec_it_ran(backend, tmp_path):
    spec = JobSpec(
        name="t", entry_point="tests.integration.jobs.report_env", args=(str(tmp_path / "o"),), distributed=False
    )
    handle, status, _ = run(backend, spec)
    assert status.state is JobState.SUCCEEDED
    found = backend.find_existing("job-1", {})
    assert found.details["spec_hash"] == spec.content_hash()  # the operator reruns when this differs


SUBMIT_AND_HANG = """
import json, sys, time
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.neuron.spec import JobSpec
spec = JobSpec.from_dict(json.loads(sys.argv[2]))
handle = LocalBackend(sys.argv[1]).submit(spec, "job-1", {})
print(json.dumps(handle.to_dict()), flush=True)
while True:  # the worker waits on its job until it is killed
    time.sleep(1)
"""


def worker_alive(worker: subprocess.Popen) -> None:
    assert worker.poll() is None, f"the worker exited with {worker.returncode}"


def test_a_killed_workers_job_is_attached_to_and_never_trained_twice(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    spec = JobSpec(name="t", entry_point="tests.integration.jobs.count_runs", args=(str(work),), nodes=1)
    worker = subprocess.Popen(
        [sys.executable, "-c", SUBMIT_AND_HANG, str(tmp_path / "state"), json.dumps(spec.to_dict())],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    submitted = json.loads(worker.stdout.readline())
    wait_for(lambda: len(started_lines(work)) >= 2, "both ranks started", lambda: worker_alive(worker))
    worker.kill()  # SIGKILL: no on_kill, no cleanup
    worker.wait()
    worker.stdout.close()

    retry = LocalBackend(tmp_path / "state", all_ranks=True)  # the next try, in a new worker process
    try:
        handle = retry.find_existing("job-1", {})
        assert handle is not None and handle.job_id == submitted["job_id"]
        assert handle.details["spec_hash"] == spec.content_hash()
        assert retry.status(handle).state is JobState.RUNNING
        (work / "go").touch()
        lines: list[str] = []
        assert retry.wait(handle, lines.append, 120).state is JobState.SUCCEEDED
    finally:
        stop_all(tmp_path / "state")
    assert "[node 0 rank 1] rank 1 done" in lines  # all_ranks: every rank's lines go to the task log
    assert len((work / "started").read_text().splitlines()) == 2  # trained once: one start per rank
    pids = [int(line.split()[1]) for line in (work / "started").read_text().splitlines()]
    assert not any(alive(pid) for pid in pids)
    # A later try (or one after the job ended unobserved) takes the result without running it again.
    again = LocalBackend(tmp_path / "state").find_existing("job-1", {})
    assert again.job_id == handle.job_id and retry.status(again).state is JobState.SUCCEEDED


def stop_all(state_dir: Path) -> None:
    """Test cleanup: stop whatever a job left running, even when an assertion failed first."""
    state = json.loads((state_dir / "job-1.json").read_text())
    backend = LocalBackend(state_dir)
    handle = JobHandle("local", state["job_id"], "job-1")
    if backend.status(handle).state is JobState.RUNNING:
        backend.cancel(handle, "test cleanup")


def test_ranks_whose_torchrun_agent_was_killed_are_stopped_by_their_node(backend, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    spec = JobSpec(name="t", entry_point="tests.integration.jobs.count_runs", args=(str(work),), nodes=1)
    handle = backend.submit(spec, "job-1", {})
    try:
        wait_for(lambda: len(started_lines(work)) >= 2, "both ranks started", running(backend, handle))
        supervisor = backend._jobs[handle.job_id].nodes[0].pid
        (agent,) = map(int, Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split())
        os.kill(agent, signal.SIGKILL)  # the ranks live in sessions of their own: nobody signals them
        status = backend.wait(handle, lambda line: None, 120)
    finally:
        stop_all(tmp_path / "state")
    assert status.state is JobState.FAILED and status.exit_code == 137, status
    ranks = [int(line.split()[1]) for line in (work / "started").read_text().splitlines()]
    assert not any(alive(pid) for pid in ranks)


def test_a_job_that_ended_while_no_worker_watched_is_judged_by_its_exit_record(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "go").touch()
    spec = JobSpec(name="t", entry_point="tests.integration.jobs.count_runs", args=(str(work),), distributed=False)
    first = LocalBackend(tmp_path / "state")
    handle = first.submit(spec, "job-1", {})
    first._jobs[handle.job_id].nodes[0].process.wait()  # the job ends; its worker never looked
    fresh = LocalBackend(tmp_path / "state")
    found = fresh.find_existing("job-1", {})
    assert found is not None and fresh.status(found).state is JobState.SUCCEEDED


def listening_addresses(port: int) -> set[str]:
    """Local addresses of the LISTEN sockets on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add("127.0.0.1" if address == "0100007F" else address)
    return found


def test_the_trainer_gets_an_allowlisted_environment_and_a_loopback_rendezvous(backend, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "worker-secret")
    monkeypatch.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "postgresql://user:pw@db/airflow")
    monkeypatch.setenv("LD_PRELOAD", "/tmp/evil.so")
    work = tmp_path / "work"
    work.mkdir()
    spec = JobSpec(name="t", entry_point="tests.integration.jobs.dump_env", args=(str(work),), nodes=1, output_uri="file:///o",
                   env={"AWS_ACCESS_KEY_ID": "from-the-connection", "TRAINIUM_RUNTIME": "eager"})  # fmt: skip
    handle = backend.submit(spec, "job-1", {})
    try:
        wait_for(
            lambda: len(list(work.glob("env-*.json"))) >= 2, "both ranks wrote their env", running(backend, handle)
        )
        env = json.loads((work / "env-0.json").read_text())
        # the store is up while ranks run: it listens on the loopback address only
        assert listening_addresses(int(env["TRAINIUM_MAIN_PORT"])) == {"127.0.0.1"}
        (work / "go").touch()
        assert backend.wait(handle, lambda line: None, 120).state is JobState.SUCCEEDED
    finally:
        stop_all(tmp_path / "state")
    for leaked in ("AWS_SECRET_ACCESS_KEY", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "LD_PRELOAD"):
        assert leaked not in env
    assert env["PATH"] == os.environ["PATH"] and env["PJRT_DEVICE"] == "CPU"  # this machine's essentials
    assert env["AWS_ACCESS_KEY_ID"] == "from-the-connection" and env["TRAINIUM_RUNTIME"] == "eager"  # the job's env
    assert env["TRAINIUM_OUTPUT_URI"] == "file:///o" and env["MALLOC_ARENA_MAX"] == "64"  # the container's env
    assert env["MASTER_ADDR"] == "127.0.0.1"


def test_a_job_cancelled_while_waited_on_ends_the_wait(backend, tmp_path):
    pids = tmp_path / "pids"
    spec = JobSpec(
        name="t", entry_point="tests.integration.jobs.fail_rank", args=("99", "0", str(pids)), distributed=False
    )
    handle = backend.submit(spec, "job-1", {})

    def cancel_on_first_line(line: str) -> None:  # the launcher's own line comes first
        wait_for(lambda: bool(list(pids.glob("*.pid"))), "the job's process started")  # then the job starts
        backend.cancel(handle, "test: cancelled from the log")

    status = backend.wait(handle, cancel_on_first_line, 120)
    assert status.state is JobState.CANCELLED and "cancelled from the log" in status.reason
    (pid_file,) = pids.glob("*.pid")
    assert not alive(int(pid_file.read_text()))


@pytest.mark.parametrize("keep", [False, True])
def test_a_succeeded_jobs_working_folder_goes_unless_kept_its_logs_stay(tmp_path, keep):
    """With a file:// artifact root every output would be on disk twice: the job's uploaded copy is the one."""
    local = LocalBackend(tmp_path / "state", max_processes_per_node=2, keep_work_folders=keep)
    out = tmp_path / "out"
    write = "import pathlib; pathlib.Path('result.txt').write_text('done'); print('wrote it')"
    spec = JobSpec(name="keep", command=("python", "-c", write), distributed=False, output_uri=out.as_uri())
    handle, status, lines = run(local, spec)
    assert status.state is JobState.SUCCEEDED, "\n".join(lines)
    assert (out / "result.txt").read_text() == "done"  # uploaded before the job ended
    job_dir = tmp_path / "state" / "jobs" / handle.job_id
    assert (job_dir / "node0-job").exists() is keep
    assert "wrote it" in (job_dir / "node0.log").read_text()
