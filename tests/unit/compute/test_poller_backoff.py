"""The Batch poller backs off while DescribeJobs is throttled: the interval doubles per throttled call, up to
5 minutes (``docs/batch.md``), and is back to the interval after one good call. Throttling never ends the
watch; any other error does at the fifth in a row.

The errors are what botocore makes of the API's own throttling answer (HTTP 429, ``x-amzn-ErrorType``), parsed
by the Batch protocol's parser: the poller must know them by the code botocore gives them.
"""

from __future__ import annotations

import json

import pytest
from botocore.awsrequest import HTTPHeaders
from botocore.exceptions import ClientError
from botocore.parsers import create_parser
from botocore.session import get_session

from airflow_provider_trainium.compute.poller import Backoff


def batch_error(status: int, code: str, message: str) -> ClientError:
    """The ClientError botocore raises for DescribeJobs answering ``status`` with error ``code``."""
    model = get_session().get_service_model("batch")
    operation = model.operation_model("DescribeJobs")
    parser = create_parser(model.metadata["protocol"])
    headers = HTTPHeaders()
    headers["x-amzn-ErrorType"] = f"{code}:http://internal.amazon.com/coral/com.amazonaws.batch/"
    answer = {"status_code": status, "headers": headers, "body": json.dumps({"message": message}).encode()}
    parsed = parser.parse(answer, operation.output_shape)
    return ClientError(parsed, "DescribeJobs")


THROTTLED = batch_error(429, "TooManyRequestsException", "Too Many Requests")
THROTTLING = batch_error(400, "ThrottlingException", "Rate exceeded")
BROKEN = batch_error(500, "ServerException", "internal error")


def test_the_errors_are_botocores_own():
    assert THROTTLED.response["Error"]["Code"] == "TooManyRequestsException"
    assert THROTTLING.response["Error"]["Code"] == "ThrottlingException"


@pytest.mark.parametrize("error", [THROTTLED, THROTTLING])
def test_throttling_doubles_the_interval_up_to_five_minutes(error):
    backoff = Backoff(30.0)
    assert backoff.delay == 30.0
    assert [backoff.failed(error) for _ in range(7)] == [60.0, 120.0, 240.0, 300.0, 300.0, 300.0, 300.0]


def test_one_good_call_restores_the_interval():
    backoff = Backoff(30.0)
    backoff.failed(THROTTLING), backoff.failed(THROTTLING)
    assert backoff.succeeded() == 30.0 and backoff.delay == 30.0
    assert backoff.failed(THROTTLING) == 60.0  # doubling starts over from the interval


def test_throttling_is_waited_out_however_long_it_lasts():
    backoff = Backoff(0.2, max_interval=300.0, max_errors=5)
    for _ in range(50):
        backoff.failed(THROTTLED)
    assert backoff.delay == 300.0


def test_any_other_error_backs_off_then_ends_the_watch_at_the_fifth_in_a_row():
    backoff = Backoff(30.0, max_errors=5)
    assert [backoff.failed(BROKEN) for _ in range(4)] == [60.0, 120.0, 240.0, 300.0]
    with pytest.raises(ClientError, match="ServerException"):
        backoff.failed(BROKEN)


def test_a_good_call_resets_the_error_count():
    backoff = Backoff(30.0, max_errors=2)
    backoff.failed(BROKEN)
    backoff.succeeded()
    backoff.failed(BROKEN)  # one in a row again: not the end
    with pytest.raises(ClientError):
        backoff.failed(BROKEN)
