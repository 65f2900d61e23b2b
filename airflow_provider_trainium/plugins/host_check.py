"""Refuse HTTP requests whose ``Host`` header names another server: the defence against DNS rebinding.

A web page on ``evil.example`` whose DNS name is rebound to 127.0.0.1 makes the browser send its requests to
the local API server with ``Host: evil.example``; answering them lets that page log in and act. Only the
configured ``host[:port]`` values are answered (port included, compared case-insensitively). Starlette's
``TrustedHostMiddleware`` compares names without their port, so it is not used.

Enabled by ``[trainium] api_allowed_hosts`` (comma-separated), which the dev deployment sets; a production
deployment behind its own proxy leaves it unset and gets no middleware (see ``host_check_plugin``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

SECTION = "trainium"
OPTION = "api_allowed_hosts"
ALLOWED_HOSTS_ENV = f"AIRFLOW__{SECTION.upper()}__{OPTION.upper()}"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def parse_allowed_hosts(value: str) -> list[str]:
    """``"127.0.0.1:8080, localhost:8080"`` -> the lower-cased entries, blanks dropped."""
    return [part.strip().lower() for part in value.split(",") if part.strip()]


class HostCheckMiddleware:
    """ASGI middleware: HTTP 400 (a WebSocket is closed) unless the ``Host`` header is one of ``allowed_hosts``."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], allowed_hosts: Iterable[str]) -> None:
        self.app = app
        self.allowed = {host.lower() for host in allowed_hosts}
        if not self.allowed:
            raise ValueError("HostCheckMiddleware needs at least one allowed host")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._host(scope) in self.allowed:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = b"Invalid host header"
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    @staticmethod
    def _host(scope: Scope) -> str:
        name: bytes
        value: bytes
        for name, value in scope.get("headers", ()):
            if name == b"host":
                return value.decode("latin-1").strip().lower()
        return ""


def loopback() -> str:
    """``[core] hostname_callable`` for a one-host deployment: components record 127.0.0.1, where its
    loopback-only log server is reached."""
    return "127.0.0.1"
