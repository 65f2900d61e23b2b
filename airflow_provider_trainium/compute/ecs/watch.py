"""The watch loop of an ECS training task: a shared DescribeTasks and one log read per poll, one terminal event.

The same loop runs in the triggerer (``TrainiumEcsTaskTrigger``) and in the worker (non-deferred wait).
It ends when the task stops; it stops the task first when the absolute deadline passes (a task past its
deadline is money spent on nothing), when the task has not started within the placement timeout (no
capacity, no instance with the devices: stopped, not waited on forever) or when its budget runs out. The
event for a task that stopped carries its ``startedAt`` to ``stoppedAt`` (``billed_intervals``) from the
last DescribeTasks, so its cost needs no call of its own. In the triggerer (``tail_in_worker``) the lines
written after the task stopped are read by the worker from the log cursor (:meth:`EcsTaskWatch.drain`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_trainium.compute.base import Interval, JobEvent, JobState, JobStatus, LogSink
from airflow_provider_trainium.compute.budget import STOP_REASON, Budget
from airflow_provider_trainium.compute.cloudwatch import LogCursor, NodeLogs, drain, drain_streams
from airflow_provider_trainium.compute.ecs.billing import ecs_intervals, epoch
from airflow_provider_trainium.compute.ecs.poller import EcsTaskPoller
from airflow_provider_trainium.compute.ecs.status import NOT_STARTED, STOPPED, task_status

STOP_CALL_TIMEOUT = 30.0


@dataclass
class EcsTaskWatch:
    """What the loop needs to find an ECS task again from any process (what its trigger serializes).

    :param handle: ``JobHandle.to_dict()`` of the task; ``details`` holds cluster, log group and stream.
    :param deadline: epoch seconds after which the task is stopped and the job fails.
    :param placement_timeout: seconds a task may stay PROVISIONING/PENDING after it was created.
    """

    handle: dict[str, Any]
    deadline: float
    aws_conn_id: str | None
    region_name: str | None = None
    poll_interval: float = 30.0
    placement_timeout: float = 1800.0
    log_cursor_uri: str | None = None
    budget: dict[str, float] | None = None
    #: the worker reads the log lines written after the task stopped (:meth:`drain`); set for a trigger with a cursor
    tail_in_worker: bool = False
    _budget: Budget | None = field(init=False, repr=False, default=None)
    _watch_started: float = field(init=False, repr=False, default=0.0)

    def __post_init__(self) -> None:
        self.deadline = float(self.deadline)
        self.poll_interval = float(self.poll_interval)
        self.placement_timeout = float(self.placement_timeout)
        self._budget = Budget.from_dict(self.budget)
        self._watch_started = time.time()

    @property
    def details(self) -> dict[str, Any]:
        return self.handle.get("details") or {}

    def follower(self, on_log: LogSink) -> NodeLogs:
        """The task's one log stream, unprefixed, resuming at the stored cursor."""
        logs = NodeLogs(
            str(self.details.get("log_group") or ""),
            on_log,
            LogCursor(self.log_cursor_uri, self.aws_conn_id),
            prefix=False,
        )
        logs.learn(0, self.details.get("log_stream") if self.details.get("log_group") else None)
        return logs

    def _event(self, status: JobStatus, logs: NodeLogs, billed: list[Interval] | None = None) -> JobEvent:
        return JobEvent(
            handle=self.handle,
            state=status.state,
            reason=status.reason,
            exit_code=status.exit_code,
            log_tail=tuple(logs.tail),
            log_streams={str(k): v for k, v in sorted(logs.streams.items())},
            billed_intervals=None if billed is None else tuple(billed),
        )

    def _poller(self) -> EcsTaskPoller:
        return EcsTaskPoller.shared(self.aws_conn_id, self.region_name, self.poll_interval, self.details["cluster"])

    async def _stop(self, poller: EcsTaskPoller, reason: str) -> None:
        await self._stop_with(await poller.client(), reason)

    async def _stop_with(self, ecs: Any, reason: str) -> None:
        await asyncio.wait_for(
            ecs.stop_task(cluster=self.details["cluster"], task=self.handle["job_id"], reason=reason[:255]),
            STOP_CALL_TIMEOUT,
        )

    def placement_expired(self, task: dict[str, Any], now: float) -> bool:
        created = epoch(task.get("createdAt")) or self._watch_started
        return task.get("lastStatus") in NOT_STARTED and now - created >= self.placement_timeout

    def over_budget(self, task: dict[str, Any], now: float) -> str | None:
        if self._budget is None or task.get("lastStatus") in NOT_STARTED or task.get("lastStatus") == STOPPED:
            return None
        # no startedAt: count from its creation (a little more), else from when this loop began watching
        start = epoch(task.get("startedAt")) or epoch(task.get("createdAt")) or self._watch_started
        return self._budget.exceeded(start, now)

    async def run(self, on_log: LogSink) -> AsyncGenerator[JobEvent, None]:
        """Follow the task until it ends; yields exactly one event. Its DescribeTasks is the cluster's shared
        poll (:class:`EcsTaskPoller`): one call per 100 tasks watched in this event loop, per interval."""
        arn = str(self.handle["job_id"])
        poller = self._poller()
        poller.watch(arn)  # before the first await: joins the next round of the shared poll
        logs = self.follower(on_log)
        try:
            while True:
                task = (await poller.next_round()).get(arn)
                status = task_status(task) if task is not None else None
                if task is None or status is None or status.state.terminal:
                    if not self.tail_in_worker:
                        await self._read_tail(logs, await poller.client("logs"), on_log)  # what the driver flushed
                    if task is None or status is None:
                        gone = f"ECS no longer knows task {arn} (stopped tasks expire after ~1 hour)"
                        yield self._event(JobStatus(JobState.FAILED, reason=gone), logs)
                        return
                    yield self._event(status, logs, ecs_intervals(task))
                    return
                await logs.fetch(await poller.client("logs"))
                now = time.time()
                if now >= self.deadline:
                    reason = "the job did not finish before its deadline; the ECS task was stopped"
                    await self._stop(poller, "Airflow task deadline passed")
                    yield self._event(JobStatus(JobState.FAILED, reason=reason), logs)
                    return
                if self.placement_expired(task, now):
                    reason = (
                        f"the ECS task stayed {task.get('lastStatus')} for {self.placement_timeout:.0f} s: "
                        "no container instance of the required type had room (check the cluster's capacity "
                        "provider); the task was stopped"
                    )
                    await self._stop(poller, "not placed in time")
                    yield self._event(JobStatus(JobState.FAILED, reason=reason), logs)
                    return
                over = self.over_budget(task, now)
                if over:
                    await self._stop(poller, STOP_REASON)
                    yield self._event(JobStatus(JobState.FAILED, reason=over), logs)
                    return
        finally:
            poller.unwatch(arn)

    @staticmethod
    async def _read_tail(logs: NodeLogs, cloudwatch: Any, on_log: LogSink) -> None:
        """The stream to its end, in the worker (the non-deferred wait); a read that keeps failing is named."""
        if not logs.streams:
            return
        try:
            await drain(logs, cloudwatch)
        except Exception as err:  # noqa: BLE001 - the task's end stands
            on_log(f"the last log lines could not be read: {err}")

    async def drain(self, on_log: LogSink, log_streams: dict[str, str]) -> tuple[str, ...]:
        """The worker's read of what the trigger left: the task's stream from the cursor to its end."""
        streams = {"0": str(self.details.get("log_stream") or ""), **log_streams}
        cursor = LogCursor(self.log_cursor_uri, self.aws_conn_id)
        group = str(self.details.get("log_group") or "")
        return await drain_streams(group, {k: v for k, v in streams.items() if v}, on_log, cursor, prefix=False,
                                   aws_conn_id=self.aws_conn_id, region_name=self.region_name)  # fmt: skip

    async def cancel(self, reason: str) -> None:
        """Stop the task (a user killed the deferred task): one call on a client of its own, no poll."""
        from airflow.providers.amazon.aws.hooks.ecs import EcsHook

        hook = EcsHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
        async with await hook.get_async_conn() as ecs:  # type: ignore[no-untyped-call]  # the amazon provider's AwsBaseHook.get_async_conn has no annotations
            await self._stop_with(ecs, reason)
