"""Wait for an ECS training task in the triggerer, streaming its CloudWatch log into the task log.

One DescribeTasks and one GetLogEvents per poll. The trigger fires once, with the event shape
``NeuronJobOperator.execute_complete`` reads, when the task stops, when the absolute deadline passes
(it stops the task first: a task past its deadline is money spent on nothing), or when the task has
not started within the placement timeout (no capacity, no instance with the devices: stopped, not
waited on forever). ``on_kill`` stops the task when a user kills the deferred task; ``cleanup`` does
not, since it also runs when the triggerer restarts.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_trainium.compute.base import JobState, JobStatus
from airflow_provider_trainium.compute.ecs_status import NOT_STARTED, task_status
from airflow_provider_trainium.triggers.log_cursor import LogCursor

TAIL_LINES = 40
STOP_CALL_TIMEOUT = 30.0


def _epoch(value: Any) -> float | None:
    """createdAt comes back as a datetime (boto) or epoch seconds (raw JSON)."""
    if value is None:
        return None
    if hasattr(value, "timestamp"):
        return float(value.timestamp())
    return float(value)


class EcsTaskTrigger(BaseTrigger):
    """Fires once when the ECS task in ``handle`` ends, its deadline passes or it never starts.

    :param handle: ``JobHandle.to_dict()`` of the task; ``details`` holds cluster, log group and stream.
    :param deadline: epoch seconds after which the task is stopped and the job fails.
    :param placement_timeout: seconds a task may stay PROVISIONING/PENDING after it was created.
    """

    def __init__(
        self,
        handle: dict[str, Any],
        deadline: float,
        aws_conn_id: str | None,
        region_name: str | None = None,
        poll_interval: float = 30.0,
        placement_timeout: float = 1800.0,
        log_cursor_uri: str | None = None,
    ) -> None:
        super().__init__()
        self.handle = handle
        self.deadline = float(deadline)
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.poll_interval = float(poll_interval)
        self.placement_timeout = float(placement_timeout)
        #: where log lines go; the worker path (EcsBackend.wait) points it at the task's log sink.
        self.emit: Callable[[str], None] = self._log_line
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._log_token: str | None = None
        #: Where the log position survives a triggerer restart (see ``log_cursor``); None: kept in memory only.
        self.log_cursor_uri = log_cursor_uri
        self._cursor: LogCursor | None = None
        self._watch_started = time.time()

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "handle": self.handle,
                "deadline": self.deadline,
                "aws_conn_id": self.aws_conn_id,
                "region_name": self.region_name,
                "poll_interval": self.poll_interval,
                "placement_timeout": self.placement_timeout,
                "log_cursor_uri": self.log_cursor_uri,
            },
        )

    # -- helpers ------------------------------------------------------------------------------------
    @property
    def _details(self) -> dict[str, Any]:
        return self.handle.get("details") or {}

    def _log_line(self, line: str) -> None:
        self.log.info("%s", line)

    def _hooks(self) -> tuple[Any, Any]:
        from airflow.providers.amazon.aws.hooks.ecs import EcsHook
        from airflow.providers.amazon.aws.hooks.logs import AwsLogsHook

        return (
            EcsHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name),
            AwsLogsHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name),
        )

    def _event(self, status: JobStatus) -> TriggerEvent:
        return TriggerEvent(
            {
                "handle": self.handle,
                "state": status.state.value,
                "reason": status.reason,
                "exit_code": status.exit_code,
                "log_tail": list(self._tail),
            }
        )

    async def _describe(self, ecs: Any) -> dict[str, Any] | None:
        response = await ecs.describe_tasks(cluster=self._details["cluster"], tasks=[self.handle["job_id"]])
        tasks = response.get("tasks") or []
        return tasks[0] if tasks else None

    async def _forward_logs(self, logs: Any) -> None:
        """Emit the log events written since the last poll (nothing yet if the stream does not exist)."""
        group, stream = self._details.get("log_group"), self._details.get("log_stream")
        if not group or not stream:
            return
        if self._cursor is None:
            self._cursor = LogCursor(self.log_cursor_uri, self.aws_conn_id)
        await self._cursor.load()
        try:
            await self._read_stream(logs, group, stream, self._cursor)
        finally:
            await self._cursor.save()

    async def _read_stream(self, logs: Any, group: str, stream: str, cursor: LogCursor) -> None:
        from botocore.exceptions import ClientError

        while True:
            kwargs: dict[str, Any] = {"logGroupName": group, "logStreamName": stream}
            kwargs.update(cursor.start_kwargs(stream))  # from where an earlier triggerer stopped
            if self._log_token:
                kwargs["nextToken"] = self._log_token
            try:
                response = await logs.get_log_events(**kwargs)
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                    return
                raise
            for event in response.get("events", []):
                if not cursor.fresh(stream, event):
                    continue
                line = str(event.get("message", "")).rstrip("\n")
                self._tail.append(line)
                self.emit(line)
            token = response.get("nextForwardToken")
            if not response.get("events") or token == self._log_token:
                self._log_token = token
                return
            self._log_token = token

    async def _stop(self, ecs: Any, reason: str) -> None:
        await asyncio.wait_for(
            ecs.stop_task(cluster=self._details["cluster"], task=self.handle["job_id"], reason=reason[:255]),
            STOP_CALL_TIMEOUT,
        )

    def _placement_expired(self, task: dict[str, Any], now: float) -> bool:
        created = _epoch(task.get("createdAt")) or self._watch_started
        return task.get("lastStatus") in NOT_STARTED and now - created >= self.placement_timeout

    # -- the trigger --------------------------------------------------------------------------------
    async def run(self) -> AsyncIterator[TriggerEvent]:
        ecs_hook, logs_hook = self._hooks()
        async with await ecs_hook.get_async_conn() as ecs, await logs_hook.get_async_conn() as logs:
            while True:
                task = await self._describe(ecs)
                await self._forward_logs(logs)
                if task is None:
                    reason = f"ECS no longer knows task {self.handle['job_id']} (stopped tasks expire after ~1 hour)"
                    yield self._event(JobStatus(JobState.FAILED, reason=reason))
                    return
                status = task_status(task)
                if status.state.terminal:
                    await self._forward_logs(logs)  # what the log driver flushed on exit
                    yield self._event(status)
                    return
                now = time.time()
                if now >= self.deadline:
                    reason = "the job did not finish before its deadline; the ECS task was stopped"
                    await self._stop(ecs, "Airflow task deadline passed")
                    yield self._event(JobStatus(JobState.FAILED, reason=reason))
                    return
                if self._placement_expired(task, now):
                    reason = (
                        f"the ECS task stayed {task.get('lastStatus')} for {self.placement_timeout:.0f} s: "
                        "no container instance of the required type had room (check the cluster's capacity "
                        "provider); the task was stopped"
                    )
                    await self._stop(ecs, "not placed in time")
                    yield self._event(JobStatus(JobState.FAILED, reason=reason))
                    return
                await asyncio.sleep(max(0.0, min(self.poll_interval, self.deadline - now)))

    async def on_kill(self) -> None:
        """A user killed the deferred task: stop the ECS task so it stops costing money."""
        ecs_hook, _ = self._hooks()
        async with await ecs_hook.get_async_conn() as ecs:
            await self._stop(ecs, "Airflow task was killed")
        self.log.info("stopped ECS task %s", self.handle["job_id"])
