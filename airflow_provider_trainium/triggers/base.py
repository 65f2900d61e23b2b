"""The shell every job trigger shares: its arguments are a compute/ watch loop's, and it only runs that loop.

A trigger subclass declares its constructor (the documented arguments, stored as attributes of the same
names) and the watch class they build. ``serialize()`` returns exactly the constructor's arguments, so what
the triggerer stores is what rebuilds the trigger; ``run()`` yields the loop's one event; ``on_kill()``
cancels the job when a user kills the deferred task (never ``cleanup()``: that also runs on triggerer restart).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_trainium.compute.watch import first_event


class JobWatchTrigger(BaseTrigger):
    #: The compute/ watch loop this trigger's arguments build (``BatchJobWatch``, ``EcsTaskWatch``...).
    watch_class: ClassVar[type]

    def arguments(self) -> dict[str, Any]:
        """The constructor's arguments, read back from the attributes of the same names."""
        names = [p for p in inspect.signature(type(self).__init__).parameters if p not in ("self", "kwargs")]
        return {name: getattr(self, name) for name in names}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", self.arguments()

    def watch(self) -> Any:
        return self.watch_class(**self.arguments())

    async def run(self) -> AsyncIterator[TriggerEvent]:
        event = await first_event(self.watch(), self._log_line)
        yield TriggerEvent(event.to_dict())

    def _log_line(self, line: str) -> None:
        self.log.info("%s", line)

    async def on_kill(self) -> None:
        """A user killed the deferred task (mark failed/success, clear): stop paying for the job."""
        self.log.info("task killed: stopping job %s", self.arguments().get("handle", {}).get("job_id"))
        await self.watch().cancel("Airflow task was killed")
