"""Waiting on AWS Batch jobs in the triggerer: one shared DescribeJobs poll, every node's log, one event.

Every trigger polling DescribeJobs on its own makes K calls per interval for K deferred jobs, and the API
throttles. Here all Batch triggers in one triggerer event loop (per AWS connection, region and interval)
share a :class:`BatchJobPoller`: each interval it describes every job anyone waits on in calls of up to 100
ids, with jitter, and backs off when throttled. Each trigger then reads the CloudWatch log stream of every
node of its job (not only the main node's) into the task log, and fires once when the job ends or its
absolute deadline passes. A user killing the task terminates the job (``on_kill``); a triggerer restart
does not (``cleanup`` leaves the job alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.triggers.log_cursor import LogCursor

DESCRIBE_JOBS_MAX = 100
THROTTLING_CODES = frozenset(
    {"TooManyRequestsException", "ThrottlingException", "Throttling", "RequestLimitExceeded", "LimitExceededException"}
)
PENDING_STATUSES = frozenset({"SUBMITTED", "PENDING", "RUNNABLE", "STARTING"})
#: TerminateJob reasons we set start with this, so a terminated job reads as cancelled, not failed.
CANCEL_PREFIX = "Airflow: "
DEFAULT_LOG_GROUP = "/aws/batch/job"
TAIL_LINES = 40


def batch_state(job: dict[str, Any]) -> JobState:
    status = job.get("status", "")
    if status == "SUCCEEDED":
        return JobState.SUCCEEDED
    if status == "FAILED":
        if str(job.get("statusReason", "")).startswith(CANCEL_PREFIX):
            return JobState.CANCELLED
        return JobState.FAILED
    if status == "RUNNING":
        return JobState.RUNNING
    return JobState.PENDING


def exit_code(job: dict[str, Any]) -> int | None:
    code = (job.get("container") or {}).get("exitCode")
    if code is None and job.get("attempts"):
        code = (job["attempts"][-1].get("container") or {}).get("exitCode")
    return None if code is None else int(code)


def node_job_ids(job_id: str, num_nodes: int) -> list[str]:
    """Batch names the node jobs of a multi-node parallel job ``<job id>#<node index>``."""
    return [f"{job_id}#{i}" for i in range(num_nodes)]


def log_stream(job: dict[str, Any] | None) -> str | None:
    if not job:
        return None
    stream = (job.get("container") or {}).get("logStreamName")
    if not stream and job.get("attempts"):
        stream = (job["attempts"][-1].get("container") or {}).get("logStreamName")
    return stream or None


def is_throttling(error: BaseException) -> bool:
    response = getattr(error, "response", None) or {}
    return response.get("Error", {}).get("Code") in THROTTLING_CODES


class BatchJobPoller:
    """Describes every job the triggers of one event loop wait on: ceil(ids / 100) DescribeJobs per interval.

    Triggers call :meth:`watch` / :meth:`unwatch` for the jobs they follow and await :meth:`next_round` for
    fresh descriptions; ids passed to ``next_round(extra)`` are described once, in the same calls. The poller
    runs while anyone watches or waits, and drops itself (and its clients) when nobody does.
    """

    _registry: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], BatchJobPoller]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(
        self,
        aws_conn_id: str | None,
        region_name: str | None,
        interval: float,
        *,
        jitter: float = 0.1,
        max_interval: float = 300.0,
        max_errors: int = 5,
    ) -> None:
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.interval = interval
        self.jitter = jitter
        self.max_interval = max_interval
        self.max_errors = max_errors
        self.rounds = 0
        self.describe_calls = 0
        self._watched: dict[str, int] = {}
        self._once: set[str] = set()
        self._waiters: list[asyncio.Future[dict[str, dict[str, Any]]]] = []
        self._task: asyncio.Task[None] | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._clients: dict[str, Any] = {}
        self._key: tuple[Any, ...] = ()

    # -- one poller per event loop and connection ---------------------------------------------------
    @classmethod
    def shared(cls, aws_conn_id: str | None, region_name: str | None, interval: float) -> BatchJobPoller:
        loop = asyncio.get_running_loop()
        pollers = cls._registry.setdefault(loop, {})
        key = (aws_conn_id, region_name, float(interval))
        poller = pollers.get(key)
        if poller is None:
            poller = pollers[key] = cls(aws_conn_id, region_name, interval)
            poller._key = key
        return poller

    def _drop(self) -> None:
        with contextlib.suppress(RuntimeError):
            pollers = self._registry.get(asyncio.get_running_loop(), {})
            if pollers.get(self._key) is self:
                del pollers[self._key]

    # -- clients (shared by all triggers of this poller) --------------------------------------------
    async def client(self, service: str = "batch") -> Any:
        """The poller's aiobotocore client for ``batch`` or ``logs``, opened on first use."""
        if service not in self._clients:
            if self._stack is None:
                self._stack = contextlib.AsyncExitStack()
            if service == "batch":
                from airflow_provider_trainium.hooks.batch import TrainiumBatchHook

                hook: Any = TrainiumBatchHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
            else:
                from airflow.providers.amazon.aws.hooks.logs import AwsLogsHook

                hook = AwsLogsHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
            creator = await hook.get_async_conn()
            self._clients[service] = await self._stack.enter_async_context(creator)
        return self._clients[service]

    # -- subscriptions --------------------------------------------------------------------------------
    def watch(self, job_id: str) -> None:
        self._watched[job_id] = self._watched.get(job_id, 0) + 1
        self._start()

    def unwatch(self, job_id: str) -> None:
        count = self._watched.get(job_id, 0) - 1
        if count > 0:
            self._watched[job_id] = count
        else:
            self._watched.pop(job_id, None)

    async def next_round(self, extra: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
        """Descriptions from the next poll round, by job id (a job Batch does not know is absent)."""
        self._once.update(extra)
        future: asyncio.Future[dict[str, dict[str, Any]]] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        self._start()
        return await future

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="trainium-batch-poller")

    # -- the loop ---------------------------------------------------------------------------------------
    def _sleep_time(self, delay: float) -> float:
        return delay * random.uniform(1 - self.jitter, 1 + self.jitter)

    async def _describe(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        client = await self.client("batch")
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), DESCRIBE_JOBS_MAX):
            self.describe_calls += 1
            response = await client.describe_jobs(jobs=ids[start : start + DESCRIBE_JOBS_MAX])
            for job in response.get("jobs", []):
                found[job["jobId"]] = job
        return found

    async def _run(self) -> None:
        delay = self.interval
        errors = 0
        try:
            while self._watched or self._waiters:
                await asyncio.sleep(self._sleep_time(delay))
                ids = list(dict.fromkeys([*self._watched, *self._once]))
                once, self._once = self._once, set()
                waiters, self._waiters = self._waiters, []
                if not ids:
                    self._resolve(waiters, {})
                    continue
                try:
                    found = await self._describe(ids)
                except Exception as err:
                    errors += 1
                    self._once |= once
                    self._waiters = waiters + self._waiters
                    if not is_throttling(err) and errors >= self.max_errors:
                        raise
                    delay = min(self.max_interval, delay * 2)
                    continue
                errors = 0
                delay = self.interval
                self.rounds += 1
                self._resolve(waiters, found)
        except BaseException as err:
            pending, self._waiters = self._waiters, []
            for future in pending:
                if not future.done():
                    future.set_exception(err if isinstance(err, Exception) else RuntimeError("poller stopped"))
            raise
        finally:
            self._drop()
            stack, self._stack, self._clients = self._stack, None, {}
            if stack is not None:
                await stack.aclose()

    @staticmethod
    def _resolve(waiters: list[asyncio.Future[dict[str, dict[str, Any]]]], found: dict[str, dict[str, Any]]) -> None:
        for future in waiters:
            if not future.done():
                future.set_result(found)


class NodeLogs:
    """Follows the CloudWatch stream of each node and prefixes every line with its node index."""

    def __init__(self, log_group: str, emit: Callable[[str], None], cursor: LogCursor | None = None) -> None:
        self.log_group = log_group
        self.emit = emit
        self.cursor = cursor or LogCursor(None)
        self.streams: dict[int, str] = {}
        self.tokens: dict[int, str] = {}
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)

    def learn(self, node: int, stream: str | None) -> None:
        if stream and node not in self.streams:
            self.streams[node] = stream

    async def fetch(self, client: Any) -> int:
        """Read what each node wrote since the last call; returns the number of lines."""
        count = 0
        await self.cursor.load()
        for node, stream in sorted(self.streams.items()):
            while True:
                kwargs: dict[str, Any] = {"logGroupName": self.log_group, "logStreamName": stream}
                kwargs.update(self.cursor.start_kwargs(stream))  # from where an earlier triggerer stopped
                if node in self.tokens:
                    kwargs["nextToken"] = self.tokens[node]
                try:
                    response = await client.get_log_events(**kwargs)
                except Exception as err:
                    code = (getattr(err, "response", None) or {}).get("Error", {}).get("Code")
                    if code == "ResourceNotFoundException":
                        break  # the stream appears once the container wrote its first line
                    raise
                for event in response.get("events", []):
                    if not self.cursor.fresh(stream, event):
                        continue
                    line = f"[node {node}] {event['message'].rstrip()}"
                    self.tail.append(line)
                    self.emit(line)
                    count += 1
                token = response.get("nextForwardToken")
                done = not response.get("events") or token == self.tokens.get(node)
                if token:
                    self.tokens[node] = token
                if done:
                    break
        await self.cursor.save()
        return count


class BatchJobTrigger(BaseTrigger):
    """Fires once when a Batch job ends (or at ``deadline``, an absolute epoch time), streaming every node's log.

    The event is the dict ``NeuronJobOperator.execute_complete`` takes: ``handle``, ``state``, ``reason``,
    ``exit_code``, ``log_tail`` (the last lines of all nodes) and ``log_streams`` (node index -> stream).
    """

    def __init__(
        self,
        *,
        handle: dict[str, Any],
        deadline: float,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        num_nodes: int = 1,
        log_group: str | None = None,
        poll_interval: float = 30.0,
        log_interval: float = 30.0,
        stream_logs: bool = True,
        log_cursor_uri: str | None = None,
    ) -> None:
        super().__init__()
        self.handle = handle
        self.deadline = float(deadline)
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.num_nodes = int(num_nodes)
        self.log_group = log_group or DEFAULT_LOG_GROUP
        self.poll_interval = float(poll_interval)
        self.log_interval = float(log_interval)
        self.stream_logs = stream_logs
        #: Where the log position survives a triggerer restart (see ``log_cursor``); None: kept in memory only.
        self.log_cursor_uri = log_cursor_uri
        #: Where log lines go; the task log by default. The worker-side wait points it at the operator's log.
        self.log_sink: Callable[[str], None] | None = None

    @property
    def job_id(self) -> str:
        return str(self.handle["job_id"])

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "handle": self.handle,
                "deadline": self.deadline,
                "aws_conn_id": self.aws_conn_id,
                "region_name": self.region_name,
                "num_nodes": self.num_nodes,
                "log_group": self.log_group,
                "poll_interval": self.poll_interval,
                "log_interval": self.log_interval,
                "stream_logs": self.stream_logs,
                "log_cursor_uri": self.log_cursor_uri,
            },
        )

    def _emit(self, line: str) -> None:
        if self.log_sink is not None:
            self.log_sink(line)
        else:
            self.log.info("%s", line)

    def _event(self, state: JobState, reason: str, code: int | None, logs: NodeLogs) -> TriggerEvent:
        return TriggerEvent(
            {
                "handle": self.handle,
                "state": state.value,
                "reason": reason,
                "exit_code": code,
                "log_tail": list(logs.tail),
                "log_streams": {str(k): v for k, v in sorted(logs.streams.items())},
            }
        )

    def _streams_missing(self, logs: NodeLogs) -> bool:
        return self.stream_logs and len(logs.streams) < self.num_nodes

    async def run(self) -> AsyncIterator[TriggerEvent]:
        poller = BatchJobPoller.shared(self.aws_conn_id, self.region_name, self.poll_interval)
        poller.watch(self.job_id)  # before the first await: joins the next round of the shared poll
        logs = NodeLogs(self.log_group, self._emit, LogCursor(self.log_cursor_uri, self.aws_conn_id))
        next_logs = 0.0
        log_delay = self.log_interval
        nodes = node_job_ids(self.job_id, self.num_nodes) if self.num_nodes > 1 else []
        ask_nodes = False
        try:
            while True:
                if time.time() >= self.deadline:
                    await self._terminate("deadline passed")
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
                if self.stream_logs and (state.terminal or time.monotonic() >= next_logs) and logs.streams:
                    try:
                        await logs.fetch(await poller.client("logs"))
                        log_delay = self.log_interval
                    except Exception as err:
                        if not is_throttling(err):
                            raise
                        log_delay = min(log_delay * 2, 300.0)
                    next_logs = time.monotonic() + log_delay
                if state.terminal:
                    if nodes and self._streams_missing(logs):
                        # one last look at the node jobs, so the tail covers every node
                        self._learn_streams(job, await poller.next_round(nodes), logs)
                        with contextlib.suppress(Exception):
                            await logs.fetch(await poller.client("logs"))
                    yield self._event(state, str(job.get("statusReason", "")), exit_code(job), logs)
                    return
        finally:
            poller.unwatch(self.job_id)

    def _learn_streams(self, job: dict[str, Any], found: dict[str, dict[str, Any]], logs: NodeLogs) -> None:
        if self.num_nodes > 1:
            for index, node_id in enumerate(node_job_ids(self.job_id, self.num_nodes)):
                logs.learn(index, log_stream(found.get(node_id)))
        else:
            logs.learn(0, log_stream(job))

    async def _terminate(self, reason: str) -> None:
        from airflow_provider_trainium.hooks.batch import TrainiumBatchHook

        hook = TrainiumBatchHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
        async with await hook.get_async_conn() as client:
            await client.terminate_job(jobId=self.job_id, reason=f"{CANCEL_PREFIX}{reason}")

    async def on_kill(self) -> None:
        """The user killed the deferred task (mark failed/success, clear): stop paying for the job."""
        self.log.info("task killed: terminating AWS Batch job %s", self.job_id)
        await self._terminate("the Airflow task was killed")
