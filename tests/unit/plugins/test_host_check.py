"""The Host check answers requests addressed to this deployment only (DNS rebinding), when configured."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from airflow_provider_trainium.plugins.host_check import ALLOWED_HOSTS_ENV, HostCheckMiddleware
from airflow_provider_trainium.plugins.host_check_plugin import HostCheckPlugin, root_middlewares

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def app(allowed: list[str]) -> Starlette:
    inner = Starlette(routes=[Route("/", lambda _: PlainTextResponse("logged in"))])
    inner.add_middleware(HostCheckMiddleware, allowed_hosts=allowed)
    return inner


@pytest.mark.parametrize(
    ("host", "status"),
    [("127.0.0.1:8080", 200), ("LOCALHOST:8080", 200), ("evil.example", 400), ("evil.example:8080", 400),
     ("127.0.0.1:9999", 400), ("127.0.0.1", 400), ("", 400)],
)  # fmt: skip
def test_only_the_allowed_host_and_port_are_answered(host: str, status: int) -> None:
    client = TestClient(app(["127.0.0.1:8080", "localhost:8080"]), base_url="http://127.0.0.1:8080")
    resp = client.get("/", headers={"Host": host})
    assert resp.status_code == status
    assert (resp.text == "logged in") is (status == 200)


def test_configured_by_option_and_off_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOWED_HOSTS_ENV, raising=False)
    assert root_middlewares() == []
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, " 127.0.0.1:8080 ,localhost:8080,")
    (entry,) = root_middlewares()
    assert entry["middleware"] is HostCheckMiddleware
    assert entry["kwargs"] == {"allowed_hosts": ["127.0.0.1:8080", "localhost:8080"]}


def test_the_package_registers_the_plugin_where_airflow_loads_it() -> None:
    """The ``airflow.plugins`` entry point (a provider info ``plugins`` entry loads only with
    ``lazy_load_providers`` off)."""
    entry = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["airflow.plugins"]["trainium_host_check"]
    module, _, name = entry.partition(":")
    assert getattr(importlib.import_module(module), name) is HostCheckPlugin
