"""The README's "Install into your Airflow" block, run as written in a fresh virtual environment.

Two stand-ins, because CI reaches PyPI and nothing else: the constraints URL's host is a local HTTP server that
serves, at the same path, the pins of ``requirements.lock`` (the project's own Airflow set of that version), and pip
finds the provider in the wheel built from this checkout (``PIP_FIND_LINKS``) instead of on PyPI. Everything else,
pip included, is what a user runs.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_trainium.deployment_files import dags_folder

pytestmark = [pytest.mark.slow, pytest.mark.install]

REPO = Path(__file__).resolve().parents[3]
MARKER = "<!-- install-commands:"
CONSTRAINTS_HOST = "https://raw.githubusercontent.com"


def install_block() -> str:
    """The bash block that follows the README's install-commands marker."""
    readme = (REPO / "README.md").read_text()
    after = readme[readme.index(MARKER) :]
    match = re.search(r"```bash\n(.*?)```", after, re.S)
    assert match, "no ```bash block after the install-commands marker"
    return match.group(1)


def lock_pins() -> dict[str, str]:
    pins = re.findall(r"^([A-Za-z0-9._-]+)==([^ \\\n]+)", (REPO / "requirements.lock").read_text(), re.M)
    return dict(pins)


@pytest.fixture
def constraints_server(tmp_path: Path) -> Iterator[str]:
    """A local stand-in for the constraints host: every constraints path the block asks for, from the lock."""
    block = install_block()
    version = re.search(r"AIRFLOW_VERSION=(\S+)", block).group(1)
    python = re.search(r"PYTHON_VERSION=(\S+)", block).group(1)
    pins = lock_pins()
    # the served file is only honest for the Airflow and Python the lock was made for
    assert pins["apache-airflow"] == version, "README's AIRFLOW_VERSION is not the lock's Airflow"
    assert python == f"{sys.version_info.major}.{sys.version_info.minor}"
    served = tmp_path / "served" / "apache" / "airflow" / f"constraints-{version}"
    served.mkdir(parents=True)
    (served / f"constraints-{python}.txt").write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "served"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(timeout=10)


def test_the_install_block_works_as_written(wheel: Path, constraints_server: str, tmp_path: Path):
    block = install_block()
    assert block.count(CONSTRAINTS_HOST) == 1
    script = block.replace(CONSTRAINTS_HOST, constraints_server)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    home = tmp_path / "airflow-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "VIRTUAL_ENV", "PYTHON"))}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(venv),
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        PIP_FIND_LINKS=str(wheel.parent),
    )
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1500
    )
    output = ran.stdout + ran.stderr
    assert ran.returncode == 0, output[-6000:]
    assert f"Processing {wheel}" in output or wheel.name in output  # this checkout's wheel, not a PyPI release
    # the block's last two commands: no import error, then the installed DAGs listed from the folder
    assert "No data found" in ran.stdout, output[-3000:]
    listed = ran.stdout.rsplit("No data found", 1)[1]
    assert all(dag_id in listed for dag_id in ("trainium_mnist_mlp", "trainium_titan_pretrain")), output[-3000:]

    shipped = sorted(p.name for p in dags_folder().glob("*.py"))
    assert sorted(p.name for p in (home / "dags").glob("*.py")) == shipped
    # a worker that only submits to ECS or Batch gets no torch
    no_torch = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True, timeout=60)
    assert no_torch.returncode != 0
