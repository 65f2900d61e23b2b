"""One describe call shared by every job watched in an event loop (Batch's DescribeJobs, ECS's DescribeTasks).

Every watch polling on its own makes K calls per interval for K jobs, and the API throttles. All watch loops
in one event loop that poll the same service (per AWS connection, region, interval and scope, such as an ECS
cluster) share one :class:`SharedPoller`: each interval it describes every job anyone waits on in calls of up
to 100 ids, with jitter, and backs off when throttled. A backend subclasses it with its describe call and its
hooks (:class:`~airflow_provider_trainium.compute.batch.poller.BatchJobPoller`,
:class:`~airflow_provider_trainium.compute.ecs.poller.EcsTaskPoller`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import weakref
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

#: DescribeJobs and DescribeTasks both take at most 100 ids per call.
DESCRIBE_MAX = 100


THROTTLING_CODES = frozenset(
    {"TooManyRequestsException", "ThrottlingException", "Throttling", "RequestLimitExceeded", "LimitExceededException"}
)


def is_throttling(error: BaseException) -> bool:
    """Whether an AWS call failed for its rate (waited out), not for what it asked."""
    response = getattr(error, "response", None) or {}
    return response.get("Error", {}).get("Code") in THROTTLING_CODES


@dataclass
class Backoff:
    """The poll interval's schedule: ``interval`` while calls succeed, doubled (up to ``max_interval``) after each
    failed one. Throttling is waited out however long it lasts; any other error ends the loop at the
    ``max_errors``-th in a row (the watch loops then see it)."""

    interval: float
    max_interval: float = 300.0
    max_errors: int = 5
    delay: float = field(init=False)
    errors: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.delay = self.interval

    def succeeded(self) -> float:
        self.errors, self.delay = 0, self.interval
        return self.delay

    def failed(self, error: BaseException) -> float:
        """The next delay after ``error``; raises it when it is not throttling and too many came in a row."""
        self.errors += 1
        if not is_throttling(error) and self.errors >= self.max_errors:
            raise error
        self.delay = min(self.max_interval, self.delay * 2)
        return self.delay


class SharedPoller:
    """Describes every job the watch loops of one event loop wait on: ceil(ids / 100) calls per interval.

    Watch loops call :meth:`watch` / :meth:`unwatch` for the jobs they follow and await :meth:`next_round` for
    fresh descriptions; ids passed to ``next_round(extra)`` are described once, in the same calls. The poller
    runs while anyone watches or waits, and drops itself (and its clients) when nobody does.

    A subclass names its ``service`` (the client the describe call uses), builds its hooks (:meth:`_hook`) and
    makes one describe call (:meth:`_describe_chunk`).
    """

    #: the client :meth:`_describe_chunk` gets ("batch", "ecs")
    service: ClassVar[str]
    _registry: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], SharedPoller]]] = (
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
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        """``sleep``: how the loop waits between rounds (a test passes a clock of its own)."""
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.interval = interval
        self.jitter = jitter
        self.max_interval = max_interval
        self.max_errors = max_errors
        self.sleep = sleep
        self.rounds = 0
        self.describe_calls = 0
        self._watched: dict[str, int] = {}
        self._once: set[str] = set()
        self._waiters: list[asyncio.Future[dict[str, dict[str, Any]]]] = []
        self._task: asyncio.Task[None] | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._clients: dict[str, Any] = {}
        self._key: tuple[Any, ...] = ()

    # -- one poller per event loop, connection and scope ------------------------------------------------
    @classmethod
    def _shared(cls, aws_conn_id: str | None, region_name: str | None, interval: float, *scope: Any) -> Self:
        loop = asyncio.get_running_loop()
        pollers = cls._registry.setdefault(loop, {})
        key = (cls, aws_conn_id, region_name, float(interval), *scope)
        poller = pollers.get(key)
        if poller is None:
            created = pollers[key] = cls(aws_conn_id, region_name, interval, *scope)
            created._key = key
            return created
        assert isinstance(poller, cls)  # the key starts with the class: only its own instances are under it
        return poller

    def _drop(self) -> None:
        with contextlib.suppress(RuntimeError):
            pollers = self._registry.get(asyncio.get_running_loop(), {})
            if pollers.get(self._key) is self:
                del pollers[self._key]

    # -- clients (shared by all watch loops of this poller) --------------------------------------------
    def _hook(self, service: str) -> Any:
        """The amazon provider hook whose async connection is the ``service`` client."""
        if service == "logs":
            from airflow.providers.amazon.aws.hooks.logs import AwsLogsHook

            return AwsLogsHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
        raise ValueError(f"{type(self).__name__} has no {service!r} client")

    async def client(self, service: str | None = None) -> Any:
        """The poller's aiobotocore client for its ``service`` (the default) or ``logs``, opened on first use."""
        service = service or self.service
        if service not in self._clients:
            if self._stack is None:
                self._stack = contextlib.AsyncExitStack()
            creator = await self._hook(service).get_async_conn()
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
        """Descriptions from the next poll round, by id (a job the service does not know is absent)."""
        self._once.update(extra)
        future: asyncio.Future[dict[str, dict[str, Any]]] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        self._start()
        return await future

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"trainium-{self.service}-poller")

    # -- the loop ---------------------------------------------------------------------------------------
    def _sleep_time(self, delay: float) -> float:
        return delay * random.uniform(1 - self.jitter, 1 + self.jitter)

    async def describe(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Descriptions of ``ids`` now, outside the shared rounds: a watch's one last look as its job ends."""
        return await self._describe(list(dict.fromkeys(ids)))

    async def _describe_chunk(self, client: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
        """One describe call for at most :data:`DESCRIBE_MAX` ids: descriptions by id."""
        raise NotImplementedError

    async def _describe(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        client = await self.client()
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), DESCRIBE_MAX):
            self.describe_calls += 1
            found.update(await self._describe_chunk(client, ids[start : start + DESCRIBE_MAX]))
        return found

    async def _run(self) -> None:
        backoff = Backoff(self.interval, self.max_interval, self.max_errors)
        try:
            while self._watched or self._waiters:
                await self.sleep(self._sleep_time(backoff.delay))
                ids = list(dict.fromkeys([*self._watched, *self._once]))
                once, self._once = self._once, set()
                waiters, self._waiters = self._waiters, []
                if not ids:
                    self._resolve(waiters, {})
                    continue
                try:
                    found = await self._describe(ids)
                except Exception as err:
                    self._once |= once
                    self._waiters = waiters + self._waiters
                    backoff.failed(err)
                    continue
                backoff.succeeded()
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
