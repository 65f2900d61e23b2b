"""The watch loop of an AWS Batch job: shared polling, every node's log, one terminal event.

The same loop runs in the triggerer (``TrainiumBatchJobTrigger``) and in the worker (non-deferred wait).
It reads the CloudWatch stream of every node of the job (not only the main node's), stops the job at its
absolute deadline or when its budget runs out, and ends with exactly one :class:`JobEvent`. An event for a job
that ended carries what Batch billed each node (``billed_intervals``), read from the descriptions the loop
has, so the job's cost needs no call of its own.

In the triggerer (``tail_in_worker``) the loop reads no log once it sees the job ended: the task's
``execute_complete`` reads that tail from the log cursor (:meth:`BatchJobWatch.drain`), because lines a trigger
logs as it finishes can miss the task's log (see :mod:`airflow_provider_trainium.compute.cloudwatch`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_trainium.compute.base import Interval, JobEvent, JobState, LogSink
from airflow_provider_trainium.compute.batch.billing import batch_intervals
from airflow_provider_trainium.compute.batch.poller import BatchJobPoller
from airflow_provider_trainium.compute.batch.status import (
    CANCEL_PREFIX,
    DEFAULT_LOG_GROUP,
    batch_state,
    exit_code,
    log_stream,
    node_job_ids,
    started_at,
)
from airflow_provider_trainium.compute.budget import STOP_REASON, Budget
from airflow_provider_trainium.compute.cloudwatch import LogCursor, NodeLogs, drain, drain_streams
from airflow_provider_trainium.compute.poller import is_throttling

MAX_LOG_DELAY = 300.0


@dataclass
class BatchJobWatch:
    """What the loop needs to find a Batch job again from any process (what its trigger serializes)."""

    handle: dict[str, Any]
    deadline: float
    aws_conn_id: str | None = "aws_default"
    region_name: str | None = None
    num_nodes: int = 1
    log_group: str | None = None
    poll_interval: float = 30.0
    log_interval: float = 30.0
    stream_logs: bool = True
    log_cursor_uri: str | None = None
    budget: dict[str, float] | None = None
    #: the worker reads the log lines written after the job ended (:meth:`drain`); set for a trigger with a cursor
    tail_in_worker: bool = False
    _budget: Budget | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        self.deadline = float(self.deadline)
        self.num_nodes = int(self.num_nodes)
        self.log_group = self.log_group or DEFAULT_LOG_GROUP
        self._budget = Budget.from_dict(self.budget)

    @property
    def job_id(self) -> str:
        return str(self.handle["job_id"])

    async def run(self, on_log: LogSink) -> AsyncGenerator[JobEvent, None]:
        """Follow the job until it ends; yields exactly one event."""
        poller = BatchJobPoller.shared(self.aws_conn_id, self.region_name, self.poll_interval)
        poller.watch(self.job_id)  # before the first await: joins the next round of the shared poll
        logs = NodeLogs(str(self.log_group), on_log, LogCursor(self.log_cursor_uri, self.aws_conn_id))
        next_logs = 0.0
        log_delay = self.log_interval
        nodes = node_job_ids(self.job_id, self.num_nodes) if self.num_nodes > 1 else []
        ask_nodes = False
        try:
            while True:
                if time.time() >= self.deadline:
                    await self.cancel("deadline passed")
                    yield self._event(JobState.FAILED, "timed out: the task's deadline passed", None, logs)
                    return
                found = await poller.next_round(nodes if ask_nodes else ())
                job = found.get(self.job_id)
                if job is None:
                    yield self._event(JobState.FAILED, f"AWS Batch does not know job {self.job_id}", None, logs)
                    return
                state = batch_state(job)
                self._learn_streams(job, found, logs)
                ask_nodes = bool(nodes) and state is not JobState.PENDING and self._streams_missing(logs)
                if nodes and state is JobState.RUNNING and self._budget is not None:
                    # a budget needs a start time; a multi-node parent may only show it on its node jobs
                    ask_nodes = ask_nodes or self._start(job, found) is None
                if state.terminal:
                    billed = await self._final_look(job, found, nodes, poller, logs)
                    if self.stream_logs and not self.tail_in_worker:
                        await self._read_tail(poller, logs, on_log)
                    yield self._event(state, str(job.get("statusReason", "")), exit_code(job), logs, billed)
                    return
                if self.stream_logs and time.monotonic() >= next_logs and logs.streams:
                    try:
                        await logs.fetch(await poller.client("logs"))
                        log_delay = self.log_interval
                    except Exception as err:
                        if not is_throttling(err):
                            raise
                        log_delay = min(log_delay * 2, MAX_LOG_DELAY)
                    next_logs = time.monotonic() + log_delay
                over = self._over_budget(job, found)
                if over:
                    await self._terminate(STOP_REASON)
                    yield self._event(JobState.FAILED, over, None, logs)
                    return
        finally:
            poller.unwatch(self.job_id)

    async def _final_look(
        self,
        job: dict[str, Any],
        found: dict[str, dict[str, Any]],
        nodes: list[str],
        poller: BatchJobPoller,
        logs: NodeLogs,
    ) -> list[Interval] | None:
        """What Batch billed the ended job; first one call for its node jobs when this round lacks them (each
        node is billed from its own start to its own stop) or a node's stream is still unknown, so the tail
        covers every node. None when that call fails: the cost step then asks Batch itself."""
        if nodes and (any(n not in found for n in nodes) or self._streams_missing(logs)):
            try:
                found = {**found, **await poller.describe(nodes)}
            except Exception:  # noqa: BLE001 - the job's end stands; only its bill is left to the cost step
                return None
            self._learn_streams(job, found, logs)
        return batch_intervals(job, [found[n] for n in nodes if n in found])

    async def _read_tail(self, poller: BatchJobPoller, logs: NodeLogs, on_log: LogSink) -> None:
        """Every node's stream to its end, in the worker (the non-deferred wait): a read that keeps failing
        is named in the log rather than failing the job's result."""
        if not logs.streams:
            return
        try:
            await drain(logs, await poller.client("logs"))
        except Exception as err:  # noqa: BLE001 - the job's end stands
            on_log(f"the last log lines could not be read: {err}")

    async def drain(self, on_log: LogSink, log_streams: dict[str, str]) -> tuple[str, ...]:
        """The worker's read of what the trigger left: every node's stream from the cursor to its end."""
        if not self.stream_logs:
            return ()
        cursor = LogCursor(self.log_cursor_uri, self.aws_conn_id)
        return await drain_streams(str(self.log_group), log_streams, on_log, cursor, prefix=True,
                                   aws_conn_id=self.aws_conn_id, region_name=self.region_name)  # fmt: skip

    def _start(self, job: dict[str, Any], found: dict[str, dict[str, Any]]) -> float | None:
        """When the job started running: its own ``startedAt``, else the earliest of its node jobs'."""
        start = started_at(job)
        if start is None and self.num_nodes > 1:
            starts = [s for s in (started_at(found.get(n)) for n in node_job_ids(self.job_id, self.num_nodes)) if s]
            start = min(starts) if starts else None
        return start

    def _over_budget(self, job: dict[str, Any], found: dict[str, dict[str, Any]]) -> str | None:
        if self._budget is None or batch_state(job) is not JobState.RUNNING:
            return None
        return self._budget.exceeded(self._start(job, found), time.time())

    def _event(
        self, state: JobState, reason: str, code: int | None, logs: NodeLogs, billed: list[Interval] | None = None
    ) -> JobEvent:
        return JobEvent(
            handle=self.handle,
            state=state,
            reason=reason,
            exit_code=code,
            log_tail=tuple(logs.tail),
            log_streams={str(k): v for k, v in sorted(logs.streams.items())},
            billed_intervals=None if billed is None else tuple(billed),
        )

    def _streams_missing(self, logs: NodeLogs) -> bool:
        return self.stream_logs and len(logs.streams) < self.num_nodes

    def _learn_streams(self, job: dict[str, Any], found: dict[str, dict[str, Any]], logs: NodeLogs) -> None:
        if self.num_nodes > 1:
            for index, node_id in enumerate(node_job_ids(self.job_id, self.num_nodes)):
                logs.learn(index, log_stream(found.get(node_id)))
        else:
            logs.learn(0, log_stream(job))

    async def cancel(self, reason: str) -> None:
        """Terminate the job as cancelled by Airflow (deadline, a user killing the task)."""
        await self._terminate(f"{CANCEL_PREFIX}{reason}")

    async def _terminate(self, reason: str) -> None:
        from airflow_provider_trainium.hooks.batch import TrainiumBatchHook

        hook = TrainiumBatchHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
        async with await hook.get_async_conn() as client:  # type: ignore[no-untyped-call]  # the amazon provider's AwsBaseHook.get_async_conn has no annotations
            await client.terminate_job(jobId=self.job_id, reason=reason)
