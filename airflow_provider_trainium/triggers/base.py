"""The shell every job trigger shares: it holds one compute/ watch loop, serializes it and runs it.

A trigger subclass names its ``watch_class`` (``BatchJobWatch``, ``EcsTaskWatch``...); the loop declares
the fields, the trigger declares none. ``serialize()`` returns ``{"watch": <the loop's arguments>}``, so
what the triggerer stores is what rebuilds the loop. A row stored before triggers serialized their loop
holds the loop's arguments as the trigger's own kwargs; those rebuild the same loop. ``run()`` yields the
loop's one event; ``on_kill()`` cancels the job when a user kills the deferred task (never ``cleanup()``:
that also runs on triggerer restart).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_trainium.compute.watch import first_event, watch_kwargs


class JobWatchTrigger(BaseTrigger):
    #: The compute/ watch loop this trigger runs (a dataclass whose ``run()`` yields one ``JobEvent``).
    watch_class: ClassVar[type]

    def __init__(self, *, watch: dict[str, Any] | None = None, **fields: Any) -> None:
        """``watch``: the loop's arguments. ``fields``: the same arguments as separate kwargs, the form rows
        stored by earlier releases hold."""
        super().__init__()
        if watch is not None and fields:
            raise TypeError(f"{type(self).__name__} takes watch= or the watch's fields, not both: {sorted(fields)}")
        self.job_watch = self.watch_class(**(watch if watch is not None else fields))

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {"watch": watch_kwargs(self.job_watch)}

    def watch(self) -> Any:
        """The loop this trigger runs."""
        return self.job_watch

    def __getattr__(self, name: str) -> Any:
        """A field of the loop read through the trigger (``trigger.handle``): declared once, on the loop."""
        watch = self.__dict__.get("job_watch")
        if watch is not None and name in {f.name for f in dataclasses.fields(watch) if f.init}:
            return getattr(watch, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    async def run(self) -> AsyncIterator[TriggerEvent]:
        event = await first_event(self.job_watch, self._log_line)
        yield TriggerEvent(event.to_dict())

    def _log_line(self, line: str) -> None:
        self.log.info("%s", line)

    async def on_kill(self) -> None:
        """A user killed the deferred task (mark failed/success, clear): stop paying for the job."""
        self.log.info("task killed: stopping job %s", (self.job_watch.handle or {}).get("job_id"))
        await self.job_watch.cancel("Airflow task was killed")
