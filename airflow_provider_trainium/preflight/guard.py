"""Runs one check so that its failure (a client error, a missing permission, a bad table value) is that
check's error and every other check still runs, as the connection's Test button does.

A check AWS could not answer (throttled, a 5xx, a dropped connection: what botocore's own standard retry mode
counts as throttling or transient) is asked again a few times; if it still cannot be answered its error is
``transient``. That is no verdict on the layout: the preflight task then fails so that Airflow's retry asks
again, instead of failing the run for good.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from airflow_provider_trainium.hooks.connection_test import aws_error_text
from airflow_provider_trainium.preflight.result import CheckResult, error

TRANSIENT_TRIES = 4
TRANSIENT_BACKOFF = 1.0


def is_transient(err: BaseException) -> bool:
    """Whether AWS failed to answer rather than answered no: botocore's standard-mode checkers decide."""
    from botocore.exceptions import ClientError
    from botocore.retries import standard

    context = standard.RetryContext(
        attempt_number=1,
        parsed_response=err.response if isinstance(err, ClientError) else None,
        caught_exception=None if isinstance(err, ClientError) else err,
    )
    if standard.ThrottledRetryableChecker().is_retryable(context):
        return True
    if standard.TransientRetryableChecker().is_retryable(context):
        return True
    status = (context.parsed_response or {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status in (500, 502, 503, 504)  # the checker reads the status off an HTTP response a ClientError lacks


def guarded(
    name: str,
    check: Callable[[], CheckResult],
    *,
    tries: int = TRANSIENT_TRIES,
    backoff: float = TRANSIENT_BACKOFF,
    sleep: Callable[[float], object] = time.sleep,
) -> CheckResult:
    for attempt in range(tries):
        try:
            return check()
        except Exception as err:  # each check reports its own failure; the others still run
            transient = is_transient(err)
            if transient and attempt < tries - 1:
                sleep(backoff * 2**attempt)
                continue
            if transient:
                return error(name, f"AWS did not answer after {tries} tries: {aws_error_text(err)}", transient=True)
            return error(name, aws_error_text(err))
    raise AssertionError("unreachable: the last try returns")
