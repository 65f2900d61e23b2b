"""A job's CloudWatch log streams: followed into one callback, resuming where an earlier watcher stopped.

:class:`NodeLogs` reads each node's stream since the last call. :class:`LogCursor` keeps where each stream was
read up to, where a restarted triggerer finds it. A trigger's kwargs are fixed once it is deferred, and the
triggerer can write no XCom or Variable, so the cursor is a small JSON object next to the job's results
(``<output_uri>/.trainium/log-cursor-<job>.json``). Per stream it holds the timestamp of the last emitted event
and how many events with that timestamp were emitted: a restarted trigger reads from that timestamp and skips
those, so no line is emitted twice. (CloudWatch's ``nextForwardToken`` expires and cannot be replayed
elsewhere; a timestamp can.)

A trigger does not read the last lines itself: Airflow's triggerer closes the task's log when the trigger
finishes, and lines it logged just before can still be on their way (they then land in the triggerer's own
log, while the cursor says they were emitted). The loop leaves the lines it finds once the job has ended to
:func:`drain`, which the task's ``execute_complete`` runs in the worker, from the cursor, to each stream's end.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import re
from collections import deque
from typing import Any

from airflow_provider_trainium.compute.base import LogSink

TAIL_LINES = 40
#: Tries of a final read (throttled or failed GetLogEvents) before its lines are given up on, with a warning.
DRAIN_TRIES = 5
DRAIN_BACKOFF = 1.0


def cursor_uri(output_uri: str | None, job_id: str) -> str | None:
    """One cursor per job: a retry that submits a new job starts its log from the top. None without an output
    URI: the position is then kept in memory only."""
    if not output_uri:
        return None
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", job_id.rsplit("/", 1)[-1])[:120]
    return f"{output_uri.rstrip('/')}/.trainium/log-cursor-{safe}.json"


class LogCursor:
    """Positions per stream: ``[timestamp of the last emitted event, events emitted at that timestamp]``."""

    def __init__(self, uri: str | None, conn_id: str | None = None) -> None:
        self.uri = uri
        self.conn_id = conn_id
        self.positions: dict[str, list[int]] = {}
        self._skip: dict[str, int] = {}
        self._resume_from: dict[str, int] = {}
        self._dirty = False
        self._loaded = False

    def _path(self) -> Any:
        from airflow_provider_trainium import artifacts

        return artifacts.path_for(str(self.uri), self.conn_id)

    def _read(self) -> dict[str, list[int]]:
        from airflow_provider_trainium import artifacts

        data = artifacts.get_bytes(self._path())
        if data is None:
            return {}
        return {k: [int(v[0]), int(v[1])] for k, v in json.loads(data).get("streams", {}).items()}

    def _write(self, data: dict[str, list[int]]) -> None:
        path = self._path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"streams": data}, sort_keys=True))

    async def load(self) -> None:
        """Read the stored positions once; streams read before become resumed streams."""
        if self._loaded or not self.uri:
            self._loaded = True
            return
        self.positions = await asyncio.to_thread(self._read)
        self._skip = {stream: pos[1] for stream, pos in self.positions.items()}
        self._resume_from = {stream: pos[0] for stream, pos in self.positions.items()}
        self._loaded = True

    async def save(self) -> None:
        """Write the positions, even when the watcher is cancelled mid-save (a triggerer stopping): a cancelled
        executor job that has not started never runs, and the next watcher would emit those lines again. So the
        write is handed to the executor at once and shielded from the cancellation."""
        if self.uri and self._dirty:
            data = {k: list(v) for k, v in self.positions.items()}
            write = functools.partial(contextvars.copy_context().run, self._write, data)  # as asyncio.to_thread
            await asyncio.shield(asyncio.get_running_loop().run_in_executor(None, write))
            self._dirty = False

    def start_kwargs(self, stream: str) -> dict[str, Any]:
        """GetLogEvents arguments for every read of a stream in this process (a token continues the query)."""
        if stream not in self._resume_from:
            return {"startFromHead": True}
        return {"startFromHead": True, "startTime": self._resume_from[stream]}

    def fresh(self, stream: str, event: dict[str, Any]) -> bool:
        """Whether an event is new; records it as emitted if so."""
        timestamp = int(event.get("timestamp") or 0)
        position = self.positions.get(stream)
        if position is not None:
            if timestamp < position[0]:
                return False
            if timestamp == position[0] and self._skip.get(stream, 0) > 0:
                self._skip[stream] -= 1
                return False
            if timestamp > position[0]:
                self._skip.pop(stream, None)
        if position is not None and timestamp == position[0]:
            position[1] += 1
        else:
            self.positions[stream] = [timestamp, 1]
        self._dirty = True
        return True


class NodeLogs:
    """Reads each node's stream since the last call and hands every new line to ``on_log`` once.

    :param prefix: label lines ``[node N]`` (multi-node backends); off for a job with one stream (ECS).
    """

    def __init__(self, log_group: str, on_log: LogSink, cursor: LogCursor | None = None, *, prefix: bool = True):
        self.log_group = log_group
        self.on_log = on_log
        self.cursor = cursor or LogCursor(None)
        self.prefix = prefix
        self.streams: dict[int, str] = {}
        self.tokens: dict[int, str] = {}
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.emitted = 0

    def learn(self, node: int, stream: str | None) -> None:
        if stream and node not in self.streams:
            self.streams[node] = stream

    def learn_all(self, log_streams: dict[str, str] | None) -> None:
        """The streams a terminal event names (``JobEvent.log_streams``: node index -> stream)."""
        for node, stream in (log_streams or {}).items():
            self.learn(int(node), stream)

    async def fetch(self, client: Any) -> int:
        """Read what each node wrote since the last call; returns the number of lines."""
        count = 0
        await self.cursor.load()
        try:
            for node, stream in sorted(self.streams.items()):
                count += await self._read(client, node, stream)
        finally:
            await self.cursor.save()
        return count

    async def _read(self, client: Any, node: int, stream: str) -> int:
        count = 0
        while True:
            kwargs: dict[str, Any] = {"logGroupName": self.log_group, "logStreamName": stream}
            kwargs.update(self.cursor.start_kwargs(stream))  # from where an earlier watcher stopped
            if node in self.tokens:
                kwargs["nextToken"] = self.tokens[node]
            try:
                response = await client.get_log_events(**kwargs)
            except Exception as err:
                code = (getattr(err, "response", None) or {}).get("Error", {}).get("Code")
                if code == "ResourceNotFoundException":
                    return count  # the stream appears once the container wrote its first line
                raise
            for event in response.get("events", []):
                if not self.cursor.fresh(stream, event):
                    continue
                message = str(event.get("message", "")).rstrip()
                line = f"[node {node}] {message}" if self.prefix else message
                self.tail.append(line)
                self.on_log(line)
                self.emitted += 1
                count += 1
            token = response.get("nextForwardToken")
            done = not response.get("events") or token == self.tokens.get(node)
            if token:
                self.tokens[node] = token
            if done:
                return count


async def drain(logs: NodeLogs, client: Any, *, tries: int = DRAIN_TRIES, backoff: float = DRAIN_BACKOFF) -> int:
    """Read every stream to its end after the job ended, retrying a failed read (throttling, a 5xx, a reset
    connection): the last lines hold the cause of a failure. Resumes at the cursor each try, so nothing is
    emitted twice; returns the number of lines."""
    before = logs.emitted
    for attempt in range(tries):
        try:
            await logs.fetch(client)
            break
        except Exception:
            if attempt == tries - 1:
                raise
            await asyncio.sleep(backoff * 2**attempt)
    return logs.emitted - before


async def drain_streams(
    log_group: str,
    log_streams: dict[str, str],
    on_log: LogSink,
    cursor: LogCursor,
    *,
    prefix: bool,
    aws_conn_id: str | None,
    region_name: str | None,
) -> tuple[str, ...]:
    """What the streams of an ended job hold past ``cursor``, handed to ``on_log`` (the worker's side of the
    trigger's log); returns those lines (the end of the job's log, for a failure's message)."""
    from airflow.providers.amazon.aws.hooks.logs import AwsLogsHook

    logs = NodeLogs(log_group, on_log, cursor, prefix=prefix)
    logs.learn_all(log_streams)
    if not logs.streams or not log_group:
        return ()
    hook = AwsLogsHook(aws_conn_id=aws_conn_id, region_name=region_name)
    async with await hook.get_async_conn() as client:  # type: ignore[no-untyped-call]  # the amazon provider's AwsBaseHook.get_async_conn has no annotations
        await drain(logs, client)
    return tuple(logs.tail)
