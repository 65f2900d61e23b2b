"""Follow the CloudWatch log streams of a job's nodes into one callback, resuming at a stored cursor."""

from __future__ import annotations

from collections import deque
from typing import Any

from airflow_provider_trainium.compute.base import LogSink
from airflow_provider_trainium.compute.log_cursor import LogCursor

TAIL_LINES = 40


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

    def learn(self, node: int, stream: str | None) -> None:
        if stream and node not in self.streams:
            self.streams[node] = stream

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
                count += 1
            token = response.get("nextForwardToken")
            done = not response.get("events") or token == self.tokens.get(node)
            if token:
                self.tokens[node] = token
            if done:
                return count
