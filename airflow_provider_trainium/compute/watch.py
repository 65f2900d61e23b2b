"""Run a backend's watch loop to its one event in this process: the worker-side (non-deferred) wait.

The triggerer runs the same loop through the backend's trigger; here ``asyncio.run`` drives it directly.
Both are built by :meth:`WatchedBackend.watch` from the same arguments (deadline, budget, log cursor), so a
task waits the same way whether it defers or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_trainium.compute.base import JobEvent, JobHandle, JobStatus, LogSink

if TYPE_CHECKING:
    from airflow_provider_trainium.compute.base import ComputeBackend


class JobWatch(Protocol):
    def run(self, on_log: LogSink) -> AsyncIterator[JobEvent]: ...

    async def cancel(self, reason: str) -> None: ...


async def first_event(watch: JobWatch, on_log: LogSink) -> JobEvent:
    """The one event the loop yields (a loop that ends without one is a bug, not a job state)."""
    async with contextlib.aclosing(watch.run(on_log)) as events:  # type: ignore[type-var]
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

    def watch(
        self,
        handle: JobHandle,
        deadline: float,
        budget: dict[str, float] | None = None,
        log_cursor_uri: str | None = None,
    ) -> Any:
        """The loop that follows ``handle`` until ``deadline`` (epoch seconds); ``log_cursor_uri`` is where it
        keeps how far it read each log stream, so a restarted wait (triggerer or worker) resumes there."""
        raise NotImplementedError

    def trigger(
        self,
        handle: JobHandle,
        deadline: float,
        budget: dict[str, float] | None = None,
        log_cursor_uri: str | None = None,
    ) -> Any:
        """The trigger shell over :meth:`watch`: its one kwarg is the loop's arguments."""
        watch = self.watch(handle, deadline, budget, log_cursor_uri)
        return trigger_from(self.trigger_classpath, {"watch": watch_kwargs(watch)})

    def wait(
        self,
        handle: JobHandle,
        log: LogSink,
        timeout_seconds: float,
        budget: dict[str, float] | None = None,
        log_cursor_uri: str | None = None,
    ) -> JobStatus:
        """The worker-side wait (non-deferrable tasks): the same watch loop, run here to its one event."""
        return wait_in_worker(self.watch(handle, time.time() + timeout_seconds, budget, log_cursor_uri), log)


def wait_for(
    backend: ComputeBackend,
    handle: JobHandle,
    log: LogSink,
    timeout_seconds: float,
    budget: dict[str, float] | None = None,
    log_cursor_uri: str | None = None,
) -> JobStatus:
    """Wait in the worker: a watched backend runs its trigger's loop, with the trigger's log cursor; any other
    backend waits its own way (its log is not read from a cursor)."""
    if isinstance(backend, WatchedBackend):
        return backend.wait(handle, log, timeout_seconds, budget, log_cursor_uri)
    return backend.wait(handle, log, timeout_seconds, budget)
