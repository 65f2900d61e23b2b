"""The deployment's configuration: its own free ports, every listener on 127.0.0.1, a random admin password
kept from its first start, and secret files that are never readable by anyone else."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from airflow_provider_trainium.plugins.host_check import ALLOWED_HOSTS_ENV
from devserver import Deployment
from devserver.deployment import HOSTNAME_CALLABLE, USERNAME
from devserver.private_files import write_private


def made(home: Path, **kwargs: object) -> Deployment:
    """A deployment whose PostgreSQL password exists (``init()`` writes it before ``initdb``)."""
    dep = Deployment(home, base_env={}, **kwargs)  # type: ignore[arg-type]
    dep.postgres.root.mkdir(parents=True, exist_ok=True)
    write_private(dep.postgres.root / "password", "pw\n")
    return dep


def ports(dep: Deployment) -> dict[str, int]:
    env = dep.env()
    return {
        "ui": dep.ui_port,
        "postgres": dep.postgres.port,
        "worker logs": int(env["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"]),
        "trigger logs": int(env["AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT"]),
        "scheduler health": int(env["AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT"]),
    }


def test_two_deployments_on_one_host_get_different_ports(tmp_path: Path) -> None:
    first, second = (ports(made(tmp_path / name)) for name in ("a", "b"))
    assert first["worker logs"] == first["trigger logs"]  # one log server serves the shared log folder
    assert 8793 not in first.values() and 8794 not in first.values()
    for name in ("postgres", "worker logs", "scheduler health"):  # the UI's: 8080 while free, else a free one
        assert first[name] != second[name], name


def test_every_listener_is_configured_on_loopback(tmp_path: Path) -> None:
    dep = made(tmp_path)
    env = dep.env()
    api = dep.command("api-server")
    assert api[api.index("--host") + 1] == "127.0.0.1" and api[api.index("--port") + 1] == str(dep.ui_port)
    for name in ("scheduler", "triggerer"):  # Airflow's own log servers bind every interface
        assert "--skip-serve-logs" in dep.command(name)
    logs = dep.command("log-server")
    assert logs[:3] == [sys.executable, "-m", "uvicorn"]
    assert logs[logs.index("--host") + 1] == "127.0.0.1"
    assert logs[logs.index("--port") + 1] == env["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"]
    assert env["AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST"] == "127.0.0.1"
    assert env["AIRFLOW__CORE__HOSTNAME_CALLABLE"] == HOSTNAME_CALLABLE  # log URLs name 127.0.0.1
    assert env[ALLOWED_HOSTS_ENV].split(",") == [f"127.0.0.1:{dep.ui_port}", f"localhost:{dep.ui_port}"]


def test_the_admin_password_is_random_on_first_start_then_kept_unless_given(tmp_path: Path) -> None:
    first = made(tmp_path / "a")
    assert first.password_generated and len(first.password) >= 16 and first.password != "admin"
    assert Deployment(tmp_path / "b", base_env={}).password != first.password
    first.env()  # what every component start does: the passwords file for the simple auth manager
    assert json.loads(first.passwords_file.read_text())[USERNAME] == first.password
    again = Deployment(tmp_path / "a", base_env={})
    assert (again.password, again.password_generated) == (first.password, False)
    given = Deployment(tmp_path / "a", base_env={}, password="chosen-one")
    assert (given.password, given.password_generated) == ("chosen-one", False)
    write_private(first.passwords_file, json.dumps({USERNAME: "admin"}))  # a home from before: admin/admin
    upgraded = Deployment(tmp_path / "a", base_env={})
    assert upgraded.password_generated and upgraded.password != "admin"


@pytest.fixture
def no_chmod_and_open_umask(monkeypatch: pytest.MonkeyPatch):
    """Umask 0 (a plain write would be 0666) and no chmod: a file is private only if created so."""

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("secret file chmod-ed after its creation: readable in between")

    monkeypatch.setattr(os, "chmod", refuse)
    monkeypatch.setattr(Path, "chmod", refuse)
    old = os.umask(0)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_secret_files_are_created_0600(tmp_path: Path, no_chmod_and_open_umask: None) -> None:
    dep = made(tmp_path, extra_users={"viewer": "viewer"})
    dep.env()
    for path in (dep.state_dir / "secrets.json", dep.passwords_file, dep.postgres.root / "password"):
        assert mode(path) == 0o600, path
    write_private(dep.passwords_file, "{}")  # replaced, still private, no temporary file left
    assert mode(dep.passwords_file) == 0o600
    assert sorted(p.name for p in dep.state_dir.iterdir()) == ["passwords.json", "postgres", "secrets.json"]


def test_write_private_creates_0600_and_replaces_atomically(tmp_path: Path, no_chmod_and_open_umask: None) -> None:
    path = tmp_path / "key"
    write_private(path, "one")
    inode = path.stat().st_ino
    write_private(path, "two")
    assert (path.read_text(), mode(path)) == ("two", 0o600)
    assert path.stat().st_ino != inode  # a new file renamed over the old one: a reader sees one or the other
