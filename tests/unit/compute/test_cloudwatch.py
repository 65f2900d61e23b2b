"""The log cursor keeps where each stream was read, so a restarted watcher emits no line twice."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor

from airflow_provider_trainium.compute.cloudwatch import LogCursor


def test_a_save_cancelled_before_its_write_starts_still_writes(tmp_path):
    """A triggerer stopping cancels its watchers mid-save; under load the write may still wait for a thread.
    Dropped, the next watcher (or the worker's drain) would emit the stream's lines again."""
    cursor = LogCursor((tmp_path / "cursor.json").as_uri())
    assert cursor.fresh("node-0", {"timestamp": 5})

    async def cancelled_while_the_executor_is_busy() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        release = threading.Event()
        busy = loop.run_in_executor(None, release.wait)  # the only thread: the write waits in the queue
        saving = asyncio.ensure_future(cursor.save())
        await asyncio.sleep(0)  # the save hands its write to the executor
        saving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await saving
        release.set()
        await busy

    asyncio.run(cancelled_while_the_executor_is_busy())  # which waits for the executor's queue
    assert json.loads((tmp_path / "cursor.json").read_text()) == {"streams": {"node-0": [5, 1]}}
