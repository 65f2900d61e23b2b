"""Every line a deferred Batch job writes reaches the task log once, the last ones included, with 30 jobs too.

Airflow's triggerer writes a trigger's log lines to the deferred task's log until it learns that the trigger
finished; then it closes that log, and lines still on their way go to the triggerer's own log
(``TriggerRunnerSupervisor``: the finished message and the lines come on different sockets). Under load, the
lines a trigger logged in the round that saw its job end were lost that way although the log cursor had
them. So a trigger logs nothing once its job has ended, and ``execute_complete`` reads the tail from the
cursor in the worker. :class:`TriggererTaskLog` stands for the triggerer: it counts a line the trigger logs
after the job ended (in moto) as lost.

The deferral, the trigger rebuilt from its serialized kwargs (a triggerer restart) and ``execute_complete``
are the operator's own; moto's Batch is driven as the Batch scheduler would (``moto_batch``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_trainium.compute.watch import first_event
from airflow_provider_trainium.triggers.batch import TrainiumBatchJobTrigger
from tests.integration.batch import moto_batch
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn, context

ENDED = {"SUCCEEDED", "FAILED"}


@dataclass
class TriggererTaskLog:
    """The task log as a triggerer writes it: a line the trigger logs once its job has ended may miss it."""

    region: str
    job_id: str
    lines: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    def __call__(self, line: str) -> None:
        ended = moto_batch.job(self.region, self.job_id).status in ENDED
        (self.lost if ended else self.lines).append(line)


def operator(nodes: int) -> Any:
    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    return TrainiumJobOperator(
        task_id="allreduce",
        entry_point="trainium_trainer.allreduce",
        compute="batch",
        instance_type="trn1.32xlarge",
        nodes=nodes,
        execution_timeout=timedelta(hours=1),
    )


def deferred_job(batch_env: Any, ti: TaskInstanceStandIn, nodes: int) -> tuple[Any, TrainiumBatchJobTrigger]:
    """The operator submits and defers; the job runs with a stream per node."""
    from airflow.sdk.exceptions import TaskDeferred

    op = operator(nodes=nodes)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context(ti))
    trigger = deferred.value.trigger
    moto_batch.hold_running(batch_env.region, [trigger.handle["job_id"]])
    return deferred.value, trigger


def restarted(trigger: TrainiumBatchJobTrigger) -> TrainiumBatchJobTrigger:
    """A new trigger from the stored kwargs, as a (re)started triggerer builds it; it polls every 0.2 s (not
    the deployment's 30 s) and reads the log each round."""
    kwargs = trigger.serialize()[1]
    kwargs["watch"].update(poll_interval=0.2, log_interval=0.0)
    return TrainiumBatchJobTrigger(**kwargs)


async def stream_until(trigger: TrainiumBatchJobTrigger, sink: TriggererTaskLog, count: int) -> None:
    """Run the trigger until the task log has ``count`` lines, then drop it (the triggerer stops)."""
    task = asyncio.ensure_future(first_event(trigger.watch(), sink))
    deadline = time.monotonic() + 60
    while len(sink.lines) < count and not task.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not task.done() and len(sink.lines) == count, (sink.lines, sink.lost)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def worker_lines(text: str, prefix: str) -> list[str]:
    """The ``[node N] <prefix>...`` lines the worker logged (stdout of the task process)."""
    return re.findall(rf"(\[node \d+\] {prefix}.*?)\s+\[airflow\.task", text)


def test_lines_written_as_the_job_ends_reach_the_task_log_once(batch_env, capfd):
    ti = TaskInstanceStandIn()
    deferral, trigger = deferred_job(batch_env, ti, nodes=2)
    job_id = trigger.handle["job_id"]
    streams = moto_batch.start_nodes(batch_env.region, job_id, 2, batch_env.logs, batch_env.log_group)
    start_ms = int(time.time() * 1000) - 60_000
    for node, stream in enumerate(streams):
        moto_batch.write_log(batch_env.logs, batch_env.log_group, stream,
                             [f"step {i} on node {node}" for i in range(3)], start_ms)  # fmt: skip
    sink = TriggererTaskLog(batch_env.region, job_id)
    asyncio.run(stream_until(restarted(trigger), sink, 6))  # streamed while the job runs; then the triggerer restarts

    for node, stream in enumerate(streams):  # the last lines come with the job's end, as the log driver flushes
        moto_batch.write_log(batch_env.logs, batch_env.log_group, stream,
                             [f"step {i} on node {node}" for i in range(3, 6)], start_ms + 100)  # fmt: skip
    moto_batch.finish(batch_env.region, job_id, success=True)
    event = asyncio.run(first_event(restarted(trigger).watch(), sink))
    assert sink.lost == [], "the trigger logged lines after its job ended: they may never reach the task log"

    capfd.readouterr()
    output = operator(nodes=2).execute_complete(context(ti), event.to_dict(), **deferral.kwargs)
    drained = worker_lines(capfd.readouterr().out, "step")
    assert output.startswith("s3://")
    every = [f"[node {n}] step {i} on node {n}" for n in range(2) for i in range(6)]
    counts = Counter(sink.lines + drained)
    assert sorted(counts) == sorted(every) and set(counts.values()) == {1}, counts


def test_a_failed_jobs_last_lines_name_the_cause(batch_env, capfd):
    """The job failed right after its last lines: the trigger logs none of them, the task's error shows them."""
    from airflow.sdk.exceptions import AirflowException

    ti = TaskInstanceStandIn()
    deferral, trigger = deferred_job(batch_env, ti, nodes=1)
    job_id = trigger.handle["job_id"]
    stream = moto_batch.job(batch_env.region, job_id).log_stream_name
    with contextlib.suppress(batch_env.logs.exceptions.ResourceAlreadyExistsException):
        batch_env.logs.create_log_group(logGroupName=batch_env.log_group)
    batch_env.logs.create_log_stream(logGroupName=batch_env.log_group, logStreamName=stream)
    lines = ["loading data", "Traceback (most recent call last):", "RuntimeError: NaN loss at step 12"]
    moto_batch.write_log(batch_env.logs, batch_env.log_group, stream, lines, int(time.time() * 1000) - 1000)
    moto_batch.finish(batch_env.region, job_id, success=False, reason="Essential container exited", exit_code=1)

    sink = TriggererTaskLog(batch_env.region, job_id)
    event = asyncio.run(first_event(restarted(trigger).watch(), sink))
    assert sink.lines == [] and sink.lost == []
    with pytest.raises(AirflowException, match="RuntimeError: NaN loss at step 12") as failed:
        operator(nodes=1).execute_complete(context(ti), event.to_dict(), **deferral.kwargs)
    assert str(failed.value).rstrip().endswith("[node 0] RuntimeError: NaN loss at step 12")
    assert worker_lines(capfd.readouterr().out, "") == [f"[node 0] {line}" for line in lines]


JOBS = 30
ROUNDS = 6


def test_thirty_concurrent_jobs_across_a_triggerer_restart_log_every_line_once(batch_env, capfd):
    """30 deferred two-node jobs in one triggerer (one event loop, one shared poller) while their nodes write,
    the triggerer restarting halfway, each job ending at its own time with lines written as it ends: the lines
    the triggers logged and those each ``execute_complete`` read add up to every line, once."""
    rng = random.Random(25)
    jobs = []
    for j in range(JOBS):
        ti = TaskInstanceStandIn(run_id=f"manual__2026-12-01T00:{j:02d}:00+00:00")
        deferral, trigger = deferred_job(batch_env, ti, nodes=2)
        streams = moto_batch.start_nodes(batch_env.region, trigger.handle["job_id"], 2, batch_env.logs,
                                         batch_env.log_group)  # fmt: skip
        jobs.append(Load(ti, deferral, trigger, streams, ends_after=rng.randint(2, ROUNDS)))

    async def nodes_write(rounds: range) -> None:
        for round_ in rounds:
            for load in jobs:
                if not load.ended:
                    await asyncio.to_thread(load.write, batch_env, round_)
            await asyncio.sleep(rng.uniform(0.1, 0.4))

    def caught_up() -> bool:
        return all(load.ended or len(load.lines) == len(load.written) for load in jobs)

    async def triggerer(rounds: range, restarts: bool) -> None:
        """One triggerer's life: every job's trigger from its stored kwargs, while the nodes write ``rounds``."""
        tasks = [asyncio.ensure_future(first_event(restarted(load.trigger).watch(), load.lines.append))
                 for load in jobs]  # fmt: skip
        await nodes_write(rounds)
        if not restarts:
            for load, task in zip(jobs, tasks, strict=True):
                load.event = await asyncio.wait_for(task, 120)
            return
        deadline = time.monotonic() + 60
        while not caught_up() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        for task in tasks:  # the triggerer stops; the jobs go on
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(triggerer(range(1, 4), restarts=True))
    asyncio.run(triggerer(range(4, ROUNDS + 1), restarts=False))

    drained = 0
    for load in jobs:
        capfd.readouterr()
        operator(nodes=2).execute_complete(context(load.ti), load.event.to_dict(), **load.deferral.kwargs)
        tail = worker_lines(capfd.readouterr().out, "job")
        counts = Counter(load.lines + tail)
        assert sorted(counts) == sorted(load.written) and set(counts.values()) == {1}, (load.written, counts)
        drained += len(tail)
    streamed = sum(len(load.lines) for load in jobs)
    assert streamed > JOBS * 6 and drained > JOBS, (streamed, drained)  # both halves carried lines


@dataclass
class Load:
    """One job of the load test: what its nodes wrote, what its triggers logged, its event."""

    ti: TaskInstanceStandIn
    deferral: Any
    trigger: TrainiumBatchJobTrigger
    streams: list[str]
    ends_after: int
    ended: bool = False
    written: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    event: Any = None

    def write(self, batch_env: Any, round_: int) -> None:
        """Three lines per node; in its last round the job ends right after them."""
        start_ms = int(time.time() * 1000) - 60_000 + 10 * round_
        job_id = self.trigger.handle["job_id"]
        for node, stream in enumerate(self.streams):
            lines = [f"job {job_id[:8]} node {node} round {round_} line {i}" for i in range(3)]
            moto_batch.write_log(batch_env.logs, batch_env.log_group, stream, lines, start_ms)
            self.written += [f"[node {node}] {line}" for line in lines]
        if round_ >= self.ends_after:
            moto_batch.finish(batch_env.region, job_id, success=True)
            self.ended = True
