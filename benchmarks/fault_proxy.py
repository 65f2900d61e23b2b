"""An HTTP proxy in front of the moto server that injects AWS faults and counts every call, per API.

Clients reach it as their ``endpoint_url``. Each request is named by its AWS operation (``X-Amz-Target``
for the JSON protocols, ``Action=`` for the query protocols, the REST path through botocore's service model
for Batch and the like, the method for S3) and the service from its SigV4 credential scope. At the plan's
rate for that operation it answers, instead of moto, with one of:

- ``throttle``: the service's throttling error in its protocol's shape (JSON ``ThrottlingException`` HTTP
  400, REST-JSON ``TooManyRequestsException`` HTTP 429, query ``Throttling`` / EC2 ``RequestLimitExceeded``
  XML (EC2's with HTTP 503, as botocore's retry data expects), S3 ``SlowDown`` 503);
- ``5xx``: ``InternalFailure`` / ``ServiceUnavailable`` (HTTP 500 or 503);
- ``reset``: the TCP connection reset without an answer;
- ``slow``: the real answer, ``slow_seconds`` late.

Faults come before the request reaches moto, so a faulted call changed nothing (what AWS's throttling and
most 5xx answers mean); the counts keep calls that reached moto apart from faulted ones.

    proxy = FaultProxy("http://127.0.0.1:5000", FaultPlan(rate=0.05, seed=1)).start()
    ... endpoint_url=proxy.url ...
    proxy.stats.forwarded["SubmitJob"], proxy.stats.faults
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import random
import re
import socket
import struct
import threading
import time
import urllib.parse
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KINDS = ("throttle", "5xx", "reset", "slow")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}
SCOPE = re.compile(r"Credential=[^/]+/\d{8}/[^/]+/([^/]+)/aws4_request")


@dataclass(frozen=True)
class FaultPlan:
    """Which calls fail and how: ``rate`` for every operation, ``per_api`` overriding it by operation name
    (``{"SubmitJob": 0.0}``), each fault one of ``kinds`` at random (seeded). Paths under ``/moto-api`` (the
    test harness's own calls) are never faulted."""

    rate: float = 0.0
    per_api: dict[str, float] = field(default_factory=dict)
    kinds: tuple[str, ...] = KINDS
    slow_seconds: float = 2.0
    seed: int | None = None

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(KINDS)
        if unknown or not self.kinds:
            raise ValueError(f"fault kinds must be among {KINDS}, got {self.kinds}")
        for name, value in {"rate": self.rate, **self.per_api}.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"fault rate of {name} must be in [0, 1], got {value}")

    def rate_for(self, api: str) -> float:
        return self.per_api.get(api, self.rate)


@dataclass
class Stats:
    """Calls per operation: reached moto (``forwarded``), answered with a fault (``faults[(api, kind)]``), and
    when each reached moto (epoch seconds, for calls per interval)."""

    forwarded: Counter[str] = field(default_factory=Counter)
    faults: Counter[tuple[str, str]] = field(default_factory=Counter)
    times: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def faulted(self, api: str | None = None) -> int:
        return sum(n for (name, _), n in self.faults.items() if api is None or name == api)

    def per_interval(self, api: str, interval: float, start: float, end: float) -> list[int]:
        """Calls of ``api`` that reached moto in each ``interval`` from ``start`` to ``end``."""
        buckets = [0] * max(1, int((end - start) // interval))
        with self.lock:
            for t in self.times.get(api, []):
                index = int((t - start) // interval)
                if 0 <= index < len(buckets):
                    buckets[index] += 1
        return buckets


@functools.cache
def _rest_operations(service: str) -> list[tuple[str, str, str]]:
    """(method, path regex, operation) of a REST service's operations, from botocore's model."""
    import botocore.session

    try:
        model = botocore.session.get_session().get_service_model(service)
    except Exception:  # noqa: BLE001 - an unknown service is named by its path
        return []
    found = []
    for name in model.operation_names:
        http = model.operation_model(name).http
        path = http.get("requestUri", "/").split("?", 1)[0]
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "/?$"
        found.append((http.get("method", "POST"), pattern, name))
    return sorted(found, key=lambda op: -len(op[1]))  # the most specific path first


def operation(method: str, path: str, headers: Any, body: bytes) -> tuple[str, str, str]:
    """(service, operation, protocol) of a request; protocol is ``json``, ``query``, ``rest-json`` or ``s3``."""
    scope = SCOPE.search(headers.get("Authorization", "") or "")
    service = scope.group(1) if scope else ""
    target = headers.get("X-Amz-Target")
    if target:
        return service, target.rsplit(".", 1)[-1], "json"
    content_type = headers.get("Content-Type", "") or ""
    if "x-www-form-urlencoded" in content_type:
        action = urllib.parse.parse_qs(body.decode(errors="replace")).get("Action", [""])[0]
        if action:
            return service, action, "query"
    if service == "s3":
        return service, f"s3:{method}", "s3"
    bare = urllib.parse.urlsplit(path).path
    for op_method, pattern, name in _rest_operations(service) if service else []:
        if op_method == method and re.match(pattern, bare):
            return service, name, "rest-json"
    return service, f"{method} {bare}", "rest-json"


def fault_answer(kind: str, service: str, api: str, protocol: str) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of a throttling or 5xx answer in the shape the service's SDK parses."""
    throttle = kind == "throttle"
    if protocol == "json":
        code = "ThrottlingException" if throttle else "InternalFailure"
        status = 400 if throttle else 500
        body = json.dumps({"__type": code, "message": f"injected by the fault proxy ({api})"}).encode()
        return status, {"Content-Type": "application/x-amz-json-1.1", "x-amzn-ErrorType": code}, body
    if protocol == "rest-json":
        code = "TooManyRequestsException" if throttle else "ServerException"
        status = 429 if throttle else 500
        body = json.dumps({"__type": code, "message": f"injected by the fault proxy ({api})"}).encode()
        return status, {"Content-Type": "application/json", "x-amzn-ErrorType": code}, body
    if protocol == "s3":
        code = "SlowDown" if throttle else "InternalError"
        status = 503 if throttle else 500
        xml = (
            f"<Error><Code>{code}</Code><Message>injected by the fault proxy</Message><RequestId>f</RequestId></Error>"
        )
        return status, {"Content-Type": "application/xml"}, xml.encode()
    status = 400 if throttle else 503
    if service == "ec2":  # EC2 throttles with a 503 (botocore's _retry.json: request_limit_exceeded)
        status = 503
        code = "RequestLimitExceeded" if throttle else "Unavailable"
        xml = (f"<Response><Errors><Error><Code>{code}</Code><Message>injected by the fault proxy</Message>"
               "</Error></Errors><RequestID>f</RequestID></Response>")  # fmt: skip
    else:
        code = "Throttling" if throttle else "ServiceUnavailable"
        side = "Sender" if throttle else "Receiver"
        xml = (f"<ErrorResponse><Error><Type>{side}</Type><Code>{code}</Code><Message>injected by the fault proxy"
               "</Message></Error><RequestId>f</RequestId></ErrorResponse>")  # fmt: skip
    return status, {"Content-Type": "text/xml"}, xml.encode()


class FaultProxy:
    """The proxy, on a free loopback port, forwarding to ``target`` (the moto server's URL)."""

    def __init__(self, target: str, plan: FaultPlan | None = None, *, port: int = 0) -> None:
        self.target = urllib.parse.urlsplit(target)
        self.plan = plan or FaultPlan()
        self.stats = Stats()
        self._random = random.Random(self.plan.seed)
        self._random_lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"proxy": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread: threading.Thread | None = None

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self.server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.stop()

    def set_plan(self, plan: FaultPlan) -> None:
        """Change the faults from now on (a soak's quiet setup, then its faulty run); a plan with a seed starts
        its own sequence of draws, so the same calls get the same faults."""
        with self._random_lock:
            self.plan = plan
            if plan.seed is not None:
                self._random = random.Random(plan.seed)

    def choose(self, api: str) -> str | None:
        """The fault for one call of ``api``, or None."""
        plan = self.plan
        with self._random_lock:
            if self._random.random() >= plan.rate_for(api):
                return None
            return self._random.choice(plan.kinds)

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, list, bytes]:
        conn = http.client.HTTPConnection(self.target.hostname, self.target.port, timeout=300)
        try:
            conn.request(method, path, body=body or None, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()


class _Handler(BaseHTTPRequestHandler):
    proxy: FaultProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        return

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _handle(self) -> None:
        body = self._body()
        service, api, protocol = operation(self.command, self.path, self.headers, body)
        kind = None if self.path.startswith("/moto-api") else self.proxy.choose(api)
        stats = self.proxy.stats
        if kind is not None:
            with stats.lock:
                stats.faults[(api, kind)] += 1
        if kind == "reset":
            self._reset()
            return
        if kind in ("throttle", "5xx"):
            status, headers, payload = fault_answer(kind, service, api, protocol)
            self._answer(status, list(headers.items()), payload)
            return
        if kind == "slow":
            time.sleep(self.proxy.plan.slow_seconds)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Content-Length"] = str(len(body))
        with stats.lock:
            stats.forwarded[api] += 1
            stats.times[api].append(time.time())
        status, response_headers, payload = self.proxy.forward(self.command, self.path, headers, body)
        self._answer(status, response_headers, payload)

    def _answer(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None:
        self.send_response_only(status)
        head = self.command == "HEAD"  # its Content-Length is the object's size, not this (empty) body's
        for key, value in headers:
            if key.lower() not in HOP_BY_HOP and (head or key.lower() != "content-length"):
                self.send_header(key, value)
        if not head:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _reset(self) -> None:
        """Close with an RST (SO_LINGER 0): the client sees its connection reset, no answer."""
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _handle
