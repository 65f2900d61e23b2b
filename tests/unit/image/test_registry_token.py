"""The anonymous token flow public.ecr.aws and Docker Hub use, against a loopback server that speaks it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from airflow_provider_trainium.image.container_registry import OciRegistry
from airflow_provider_trainium.image.errors import ContainerRegistryError
from airflow_provider_trainium.image.registry_token import parse_challenge

DIGEST = "sha256:" + "ab" * 32


class TokenRegistry(BaseHTTPRequestHandler):
    """Manifests need ``Bearer good``; ``/token`` hands it out for the scope the challenge named."""

    token = "good"
    seen: list[tuple[str, str, str]] = []

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, code: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        auth = self.headers.get("Authorization", "")
        self.seen.append((self.command, self.path, auth))
        host = f"http://{self.headers['Host']}"
        if self.path.startswith("/token?"):
            ok = "scope=repository%3Aneuron%2Fbase%3Apull" in self.path and "service=test" in self.path
            self._send(
                200 if ok else 400, {"Content-Type": "application/json"}, json.dumps({"token": self.token}).encode()
            )
        elif auth != f"Bearer {self.token}":
            challenge = f'Bearer realm="{host}/token",service="test",scope="repository:neuron/base:pull"'
            self._send(401, {"WWW-Authenticate": challenge})
        elif self.path.endswith("/manifests/1"):
            self._send(200, {"Docker-Content-Digest": DIGEST, "Content-Type": "application/json"}, b"{}")
        else:
            self._send(404, {})

    do_HEAD = do_GET


@pytest.fixture
def server() -> Iterator[str]:
    TokenRegistry.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), TokenRegistry)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join()


def test_anonymous_token_then_the_digest_and_one_token_per_client(server: str) -> None:
    registry = OciRegistry(f"{server}/neuron/base", insecure=True)
    assert registry.lookup("1") == DIGEST
    assert registry.lookup("2") is None  # the second call reuses the token: no new challenge
    calls = [(method, path.partition("?")[0], auth) for method, path, auth in TokenRegistry.seen]
    assert calls == [
        ("HEAD", "/v2/neuron/base/manifests/1", ""),
        ("GET", "/token", ""),
        ("HEAD", "/v2/neuron/base/manifests/1", "Bearer good"),
        ("HEAD", "/v2/neuron/base/manifests/2", "Bearer good"),
    ]


def test_a_token_the_registry_refuses_is_an_access_error(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TokenRegistry, "token", "other")
    registry = OciRegistry(f"{server}/neuron/base", insecure=True)
    monkeypatch.setattr("airflow_provider_trainium.image.registry_token.fetch_token", lambda *a: "stale")
    with pytest.raises(ContainerRegistryError, match="refused access"):
        registry.lookup("1")


def test_parse_challenge() -> None:
    header = 'Bearer realm="https://public.ecr.aws/token/",service="public.ecr.aws",scope="aws"'
    assert parse_challenge(header) == {"realm": "https://public.ecr.aws/token/", "service": "public.ecr.aws",
                                       "scope": "aws"}  # fmt: skip
    assert parse_challenge('Basic realm="x"') is None and parse_challenge("") is None
