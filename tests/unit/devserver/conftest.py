"""Deployments whose components are plain Python processes, to drive the supervisor and the stop in
seconds; the real components (and PostgreSQL) are in tests/e2e."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devserver import Deployment
from devserver.postgres import free_port

#: A component that ignores SIGTERM and leaves a child (also ignoring it) in its process group; the child's
#: pid goes to the file named by argv[1].
IGNORE_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN)"
STUBBORN = f"""
import subprocess, sys
{IGNORE_SIGTERM}
child = subprocess.Popen([sys.executable, "-c", "{IGNORE_SIGTERM}; time.sleep(600)"])
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(600)
"""
LONG = "import time; time.sleep(600)"
QUICK_DEATH = "import sys; sys.exit(3)"


class StandInDatabase:
    """Stands in for the PostgreSQL cluster (alive or not; start brings it up); the real one: tests/e2e."""

    def __init__(self, root: Path) -> None:
        self.data = root / "pg-data"
        self.port = 0
        self.up = True
        self.starts = 0
        #: What ``query`` answers (the running runs' scheduling lags, for ``Deployment.scheduling_lags``).
        self.rows: list[tuple] = []

    def query(self, sql: str) -> list[tuple] | None:
        return list(self.rows) if self.up else None

    def alive(self) -> bool:
        return self.up

    def start(self) -> None:
        self.starts += 1
        self.up = True

    def stop(self, timeout: float = 10) -> None:
        self.up = False


class ScriptDeployment(Deployment):
    """A deployment whose components run ``scripts[name]`` (default: a long sleep)."""

    def __init__(self, home: Path, scripts: dict[str, str] | None = None) -> None:
        super().__init__(home, ui_port=free_port(), base_env={"PATH": "/usr/bin:/bin"})
        self.scripts = scripts or {}
        self.postgres = StandInDatabase(self.state_dir)  # type: ignore[assignment]
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)

    def command(self, component: str) -> list[str]:
        return [sys.executable, "-c", self.scripts.get(component, LONG), str(self.state_dir / f"{component}.child")]

    def env(self) -> dict[str, str]:
        return dict(self.base_env)

    def start_all(self, *names: str) -> None:
        for name in names:
            self.start_component(name)
        self.running = True


@pytest.fixture
def make_deployment(tmp_path: Path) -> Iterator:
    made: list[ScriptDeployment] = []

    def make(scripts: dict[str, str] | None = None, *names: str) -> ScriptDeployment:
        dep = ScriptDeployment(tmp_path / f"home{len(made)}", scripts)
        made.append(dep)
        dep.start_all(*(names or ("scheduler", "triggerer")))
        return dep

    yield make
    for dep in made:
        dep.stop(grace=1)
