"""Run a backend's watch loop to its one event in this process: the worker-side (non-deferred) wait.

The triggerer runs the same loop through the backend's trigger; here ``asyncio.run`` drives it directly.
Both are built by :meth:`WatchedBackend.watch` from the same arguments (deadline, budget, log cursor), so a
task waits the same way whether it defers or not. One difference: a trigger with a log cursor leaves the lines
written after the job ended to the worker (:func:`drain_logs`, from ``execute_complete``), because the triggerer
may route a finishing trigger's last lines to its own log instead of the task's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_trainium.compute.base import JobEvent, JobHandle, JobStatus, LogSink, WatchRequest
from airflow_provider_trainium.compute.cloudwatch import TAIL_LINES

if TYPE_CHECKING:
    from airflow_provider_trainium.compute.base import ComputeBackend


class JobWatch(Protocol):
    def run(self, on_log: LogSink) -> AsyncGenerator[JobEvent, None]: ...

    async def cancel(self, reason: str) -> None: ...


async def first_event(watch: JobWatch, on_log: LogSink) -> JobEvent:
    """The one event the loop yields (a loop that ends without one is a bug, not a job state)."""
    async with contextlib.aclosing(watch.run(on_log)) as events:
        async for event in events:
            return event
    raise RuntimeError(f"{type(watch).__name__} ended without an event")


def wait_in_worker(watch: JobWatch, on_log: LogSink) -> JobStatus:
    """Block until the job ends, streaming its log lines to ``on_log``."""
    return asyncio.run(first_event(watch, on_log)).status()


def trigger_from(classpath: str, kwargs: dict[str, Any]) -> Any:
    """Build a backend's trigger from its classpath, the way the triggerer does from a stored row.

    Backends name their trigger shell instead of importing it, so ``compute/`` never depends on ``triggers/``.
    """
    module, _, name = classpath.rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)


def watch_kwargs(watch: Any) -> dict[str, Any]:
    """A watch loop's constructor arguments: what its trigger shell serializes, under ``watch``."""
    return {f.name: getattr(watch, f.name) for f in dataclasses.fields(watch) if f.init}


class WatchedBackend:
    """What a remote backend's wait is made of: its :meth:`watch` loop, run by its trigger shell in the
    triggerer (deferred) or here in the worker. A backend mixes this in and defines ``watch`` and
    ``trigger_classpath``."""

    #: The trigger shell (in triggers/) that the triggerer runs this backend's watch loop in.
    trigger_classpath: str

    def watch(self, request: WatchRequest) -> Any:
        """The loop that follows the request's job until its deadline, keeping how far it read each log stream
        under the request's cursor, so a restarted wait (triggerer or worker) resumes there."""
        raise NotImplementedError

    def trigger(self, request: WatchRequest) -> Any:
        """The trigger shell over :meth:`watch`: its one kwarg is the loop's arguments. With a cursor, the loop
        leaves the log's tail to :func:`drain_logs` in the worker."""
        watch = self.watch(request)
        watch.tail_in_worker = request.log_cursor_uri is not None
        return trigger_from(self.trigger_classpath, {"watch": watch_kwargs(watch)})

    def wait_until(self, request: WatchRequest, log: LogSink) -> JobStatus:
        """The worker-side wait (non-deferrable tasks): the same watch loop, run here to its one event."""
        return wait_in_worker(self.watch(request), log)


def drain_logs(backend: ComputeBackend, event: dict[str, Any], log: LogSink, log_cursor_uri: str | None) -> JobStatus:
    """The status a trigger's event carries, after the worker logged what the job wrote past the trigger's log
    cursor (its tail, which the trigger leaves here); those lines end the status's ``log_tail``. Without a cursor
    the trigger read the tail itself. A tail that cannot be read is a warning: the job's result stands."""
    status = JobStatus.from_event(event)
    if not log_cursor_uri or not isinstance(backend, WatchedBackend):
        return status
    job = JobEvent.from_dict(event)
    watch = backend.watch(WatchRequest(JobHandle.from_dict(job.handle), time.time(), None, log_cursor_uri))
    try:
        lines = asyncio.run(watch.drain(log, dict(job.log_streams)))
    except Exception as err:  # noqa: BLE001
        log(f"the last log lines of job {job.handle.get('job_id')} could not be read: {err}")
        return status
    if not lines:
        return status
    return dataclasses.replace(status, log_tail=(*status.log_tail, *lines)[-TAIL_LINES:])
