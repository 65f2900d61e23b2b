"""DescribeJobs calls per poll interval: our shared Batch poller vs the amazon provider's BatchJobTrigger.

K jobs wait in one triggerer event loop against a moto server (in this process, jobs held RUNNING). The
server counts every DescribeJobs request and the job ids in it; once every job has been described at
least once (all triggers are polling), it counts the calls made over the next few intervals.

    make bench-batch            # or: python -m benchmarks.batch_polling --ks 1 10 100 500
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

REGION = "us-east-1"
CONN_ID = "aws_bench"


class CountingServer:
    """A moto server whose WSGI app counts DescribeJobs requests and the ids they carry."""

    def __init__(self) -> None:
        from moto.server import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        self.app = DomainDispatcherApplication(create_backend_app)
        self.lock = threading.Lock()
        self.calls = 0
        self.seen: set[str] = set()
        self.server = make_server("127.0.0.1", 0, self._count, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _count(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") == "/v1/describejobs":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            with self.lock:
                self.calls += 1
                self.seen.update(json.loads(body or b"{}").get("jobs", []))
        return self.app(environ, start_response)

    def reset(self) -> None:
        with self.lock:
            self.calls, self.seen = 0, set()

    def __enter__(self) -> CountingServer:
        import requests

        self.thread.start()
        requests.post(f"{self.url}/moto-api/config", json={"batch": {"use_docker": False}}, timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()


def setup_jobs(count: int) -> list[str]:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    from airflow_provider_trainium.hooks.batch import TrainiumBatchHook
    from tests.integration.batch import moto_batch

    batch = TrainiumBatchHook(aws_conn_id=CONN_ID, region_name=REGION).client
    iam = AwsBaseHook(aws_conn_id=CONN_ID, client_type="iam").conn
    suffix = f"{count}-{time.monotonic_ns()}"
    queue = moto_batch.create_queue(batch, iam, f"bench-{suffix}")
    definition = batch.register_job_definition(
        jobDefinitionName=f"bench-{suffix}",
        type="container",
        containerProperties={"image": "bench", "vcpus": 1, "memory": 512},
    )["jobDefinitionArn"]
    ids = [batch.submit_job(jobName=f"j{i}", jobQueue=queue, jobDefinition=definition)["jobId"] for i in range(count)]
    moto_batch.hold_running(REGION, ids)
    return ids


def our_trigger(job_id: str, interval: float) -> Any:
    from airflow_provider_trainium.triggers.batch import TrainiumBatchJobTrigger

    return TrainiumBatchJobTrigger(handle={"job_id": job_id}, deadline=time.time() + 3600, aws_conn_id=CONN_ID,
                                   region_name=REGION, poll_interval=interval, stream_logs=False)  # fmt: skip


def upstream_trigger(job_id: str, interval: float) -> Any:
    from airflow.providers.amazon.aws.triggers.batch import BatchJobTrigger

    return BatchJobTrigger(job_id=job_id, aws_conn_id=CONN_ID, region_name=REGION, waiter_delay=int(interval),
                           waiter_max_attempts=100000)  # fmt: skip


async def measure(server: CountingServer, ids: list[str], make: Callable[[str, float], Any], interval: float,
                  intervals: int, warmup_timeout: float) -> float:  # fmt: skip
    async def drain(trigger: Any) -> None:
        async for _ in trigger.run():
            return

    server.reset()
    tasks = [asyncio.create_task(drain(make(job_id, interval))) for job_id in ids]
    try:
        deadline = time.monotonic() + warmup_timeout
        while len(server.seen & set(ids)) < len(ids):  # every trigger has polled once
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(server.seen)} of {len(ids)} jobs were ever described")
            await asyncio.sleep(0.05)
        start_calls, start = server.calls, time.monotonic()
        await asyncio.sleep(interval * intervals)
        calls, elapsed = server.calls - start_calls, time.monotonic() - start
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return calls / (elapsed / interval)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 10, 100, 500])
    parser.add_argument("--interval", type=float, default=1.0, help="poll interval (s), the same for both")
    parser.add_argument("--intervals", type=int, default=10, help="intervals measured per run")
    args = parser.parse_args(argv)
    for noisy in ("werkzeug", "airflow.providers.amazon", "botocore", "aiobotocore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    rows = []
    with CountingServer() as server:
        os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps(
            {"conn_type": "aws", "login": "bench", "password": "bench",
             "extra": {"endpoint_url": server.url, "region_name": REGION}}
        )  # fmt: skip
        for k in args.ks:
            ids = setup_jobs(k)
            ours = asyncio.run(measure(server, ids, our_trigger, args.interval, args.intervals, 120))
            theirs = asyncio.run(measure(server, ids, upstream_trigger, args.interval, args.intervals, 600))
            rows.append((k, ours, theirs))
            print(f"K={k}: ours {ours:.1f}, amazon BatchJobTrigger {theirs:.1f} DescribeJobs/interval", flush=True)

    print(f"\nDescribeJobs calls per {args.interval:g} s poll interval, K jobs waiting in one triggerer (moto)\n")
    print("| K waiting jobs | this provider (shared poller) | amazon BatchJobTrigger | ratio |")
    print("|---:|---:|---:|---:|")
    for k, ours, theirs in rows:
        print(f"| {k} | {ours:.1f} | {theirs:.1f} | {theirs / ours:.0f}x |")


if __name__ == "__main__":
    main()
