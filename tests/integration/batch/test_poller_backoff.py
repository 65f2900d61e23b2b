"""The shared Batch poller's own loop waits out throttling on the schedule ``docs/batch.md`` promises: the
interval (±10 % jitter), doubled per throttled DescribeJobs up to 5 minutes, and the interval again after the
first good round. The loop's clock is injected, so the schedule is read from what it asked to wait, not timed.

The DescribeJobs calls go to the moto server through the poller's real aiobotocore client; the first six are
answered with Batch's throttling error (moto cannot throttle: a ``before-call`` hook on that client raises
what botocore makes of a throttling answer).
"""

from __future__ import annotations

import asyncio

import pytest

from airflow_provider_trainium.compute.batch.poller import BatchJobPoller
from tests.integration.batch.test_poller import submit_many
from tests.unit.compute.test_poller_backoff import THROTTLED, THROTTLING

INTERVAL = 30.0
#: Six throttled calls, then good rounds.
SCHEDULE = [30.0, 60.0, 120.0, 240.0, 300.0, 300.0, 300.0, 30.0]


@pytest.mark.parametrize("error", [THROTTLED, THROTTLING], ids=["TooManyRequests", "Throttling"])
def test_the_loop_doubles_its_wait_while_throttled_and_resets_after_a_good_round(batch_env, error):
    (job_id,) = submit_many(batch_env, 1)
    waits: list[float] = []

    async def clock(delay: float) -> None:
        waits.append(delay)
        await asyncio.sleep(0)  # yields to the watch loops, no wall-clock wait

    async def scenario() -> tuple[dict, dict, int]:
        poller = BatchJobPoller(batch_env.config.aws_conn_id, batch_env.region, INTERVAL, sleep=clock)
        client = await poller.client("batch")
        throttled = {"left": 6}

        def throttle(**_: object) -> None:
            if throttled["left"]:
                throttled["left"] -= 1
                raise error

        client.meta.events.register("before-call.batch.DescribeJobs", throttle)
        poller.watch(job_id)
        first = await poller.next_round()
        second = await poller.next_round()
        poller.unwatch(job_id)
        await asyncio.wait_for(poller._task, 10)  # nobody watches: the loop ends by itself
        return first, second, poller.describe_calls

    first, second, calls = asyncio.run(scenario())
    assert job_id in first and job_id in second and calls == 8
    assert len(waits) >= len(SCHEDULE)
    for got, expected in zip(waits, SCHEDULE, strict=False):
        assert expected * 0.9 <= got <= expected * 1.1, f"waits {waits} off the schedule {SCHEDULE}"
