"""Shared fixtures: a real moto server as the AWS endpoint, reached through Airflow connections."""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Under pytest-xdist, the order workers take modules in (tests/xdist_order.py).
pytest_plugins = ["tests.xdist_order", "tests.fast_exit"]

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The same throwaway Airflow home `make test` uses, for a bare `pytest` run after `make airflow-home`.
os.environ.setdefault("AIRFLOW_HOME", os.path.join(_REPO, ".airflow"))


def _worker_home() -> None:
    """Under pytest-xdist, each worker gets its own Airflow home below the shared one (its own metadata
    database, default artifact root and logs), seeded with the shared home's migrated database when there is
    one; so does a pytest process run beside another (``TESTS_WORKER``: make test-fast's halves). Set before
    anything imports Airflow, which reads AIRFLOW_HOME once."""
    worker = os.environ.get("PYTEST_XDIST_WORKER") or os.environ.get("TESTS_WORKER")
    if not worker:
        return
    shared = os.environ["AIRFLOW_HOME"]
    home = os.path.join(shared, "workers", worker)
    os.makedirs(home, exist_ok=True)
    database = os.path.join(shared, "airflow.db")
    if os.path.exists(database) and not os.path.exists(os.path.join(home, "airflow.db")):
        shutil.copy2(database, home)
    os.environ["AIRFLOW_HOME"] = home


_worker_home()
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", os.path.join(_REPO, "dags"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("PJRT_DEVICE", "CPU")
# Remote jobs wait in the triggerer, as in a deployment that runs one (the dev deployment sets the same); a test of
# the worker-side wait passes deferrable=False, and tests/unit/operators checks the default follows this setting.
os.environ.setdefault("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MOTO_REGION = "us-east-1"

_TESTS = os.path.dirname(os.path.abspath(__file__))
#: Top-level test folders whose tests get the marker of the same name, so ``-m "not integration"`` works
#: whichever paths are given.
_FOLDER_MARKERS = ("integration", "e2e")
#: Folders of the native stack's tests (marker ``native``): they run in .venv-native on torch 2.14
#: (``make test-native``), and the main venv's run (torch 2.9 + torch-xla) deselects them.
_NATIVE_FOLDERS = tuple(
    os.path.join(*parts) + os.sep
    for parts in (
        ("integration", "native"),
        ("integration", "titan"),
        ("unit", "trainium_trainer", "native"),
        ("unit", "trainium_trainer", "titan"),
    )  # fmt: skip
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by its folder: tests/integration (moto server, dag.test(), training subprocesses,
    buildah, linters) and tests/e2e (a real deployment); tests/unit stays unmarked. The native stack's
    folders also get ``native``."""
    for item in items:
        rel = os.path.relpath(str(item.path), _TESTS)
        folder = rel.split(os.sep, 1)[0]
        if folder in _FOLDER_MARKERS:
            item.add_marker(getattr(pytest.mark, folder))
        if rel.startswith(_NATIVE_FOLDERS):
            item.add_marker(pytest.mark.native)


@pytest.fixture(scope="session", autouse=True)
def _airflow_db() -> None:
    """The Airflow home's metadata database, migrated on first use: plain ``pytest`` from the repository root
    works without ``make airflow-home``, and a home that is already migrated costs one table lookup."""
    from airflow import settings
    from sqlalchemy import inspect

    if settings.engine is None or inspect(settings.engine).has_table("dag"):
        return
    from airflow.utils.db import upgradedb

    upgradedb()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """A moto server on loopback for the whole session; Batch runs jobs without Docker."""
    import requests
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    requests.post(f"{url}/moto-api/config", json={"batch": {"use_docker": False}}, timeout=10).raise_for_status()
    yield url
    server.stop()


@pytest.fixture
def moto_reset(moto_server: str) -> str:
    """Empties every moto backend before the test. The reset joins each Batch job an earlier test left running
    for up to 0.2 s (moto's ``BatchBackend.reset``), which took over 10 s on a loaded CI machine."""
    import requests

    requests.post(f"{moto_server}/moto-api/reset", timeout=120).raise_for_status()
    requests.post(
        f"{moto_server}/moto-api/config", json={"batch": {"use_docker": False}}, timeout=10
    ).raise_for_status()
    return moto_server


@pytest.fixture
def aws_conn_id(moto_reset: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """An Airflow AWS connection ``aws_moto`` whose endpoint_url is the moto server."""
    conn = {
        "conn_type": "aws",
        "login": "testing",
        "password": "testing",
        "extra": {"endpoint_url": moto_reset, "region_name": MOTO_REGION},
    }
    monkeypatch.setenv("AIRFLOW_CONN_AWS_MOTO", json.dumps(conn))
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    return "aws_moto"


def set_trainium_connection(monkeypatch: pytest.MonkeyPatch, **extra: object) -> None:
    """Define ``trainium_default`` through the environment, as a deployment would."""
    monkeypatch.setenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", json.dumps({"conn_type": "trainium", "extra": extra}))


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` (relative path -> content) under ``root``."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root
