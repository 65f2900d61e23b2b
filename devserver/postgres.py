"""A PostgreSQL cluster the project owns: Debian's server binaries, data under the Airflow home, 127.0.0.1 only.

PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` system user (created by
Debian's package) and owns its data directory; as any other user it runs as that user.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import time
from functools import cached_property
from pathlib import Path

from devserver.private_files import write_private

DATABASE = "airflow"
USER = "airflow"


def server_bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/<major>/bin`` (Debian's ``postgresql`` package)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise RuntimeError("PostgreSQL server binaries not found: apt-get install postgresql (.ci/system-deps.sh)")
    return Path(found[-1]).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user counts), without signalling it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: A session left idle inside a transaction this long is ended by the server, its locks with it. A scheduler
#: killed mid-transaction leaves its connection open in the LocalExecutor workers it forked (Airflow disposes
#: the engine in a forked child with ``close=False``): its ``SELECT ... FOR UPDATE`` row locks on ``dag_run``
#: then outlive it, and the next scheduler skips that run (``skip_locked``) for as long as those workers live.
#: No Airflow component keeps a transaction idle for a minute in normal work.
IDLE_IN_TRANSACTION_TIMEOUT = "60s"


class PostgresCluster:
    """``initdb`` once, then ``pg_ctl start``/``stop``; the password lives next to the data, readable by its owner."""

    def __init__(self, root: Path, port: int | None = None, log_file: Path | None = None) -> None:
        self.root = root
        self.data = root / "data"
        self.port = port or free_port()
        self.log_file = log_file or root / "postgres.log"
        self.run_as = "postgres" if os.geteuid() == 0 else None

    @cached_property
    def bin(self) -> Path:
        return server_bin_dir()

    @property
    def password(self) -> str:
        return (self.root / "password").read_text().strip()

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://{USER}:{self.password}@127.0.0.1:{self.port}/{DATABASE}"

    def query(self, sql: str) -> list[tuple] | None:
        """The rows of one read-only statement on the Airflow database; None while the server does not answer."""
        import psycopg2

        try:
            conn = psycopg2.connect(host="127.0.0.1", port=self.port, user=USER, password=self.password,
                                    dbname=DATABASE, connect_timeout=5)  # fmt: skip
        except (psycopg2.Error, OSError):
            return None
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall()
        except psycopg2.Error:
            return None
        finally:
            conn.close()

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.run_as, "--", *args] if self.run_as else list(args)

    def _own(self, *paths: Path) -> None:
        if self.run_as:
            entry = pwd.getpwnam(self.run_as)
            for path in paths:
                os.chown(path, entry.pw_uid, entry.pw_gid)

    def init(self) -> None:
        """Create the cluster (password auth for the ``airflow`` superuser) unless it exists."""
        if (self.data / "PG_VERSION").exists():
            return
        shutil.rmtree(self.data, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        self.data.mkdir(mode=0o700)
        password_file = self.root / "password"
        write_private(password_file, secrets.token_urlsafe(16) + "\n")
        self._own(self.root, self.data, password_file)
        subprocess.run(
            self._cmd(str(self.bin / "initdb"), "-D", str(self.data), "-U", USER, "--pwfile", str(password_file),
                      "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C.UTF-8"),
            check=True, capture_output=True, text=True,
        )  # fmt: skip

    def start(self) -> None:
        """Start the server on 127.0.0.1:port (no Unix socket outside the data directory) and create the database."""
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.touch()
        self._own(self.log_file)
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data} "
            f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT}"
        )
        subprocess.run(
            self._cmd(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log_file), "-o", options,
                      "-w", "-t", "60", "start"),
            check=True, capture_output=True, text=True, start_new_session=True,  # Ctrl-C reaches the supervisor only
        )  # fmt: skip
        self._create_database()

    def _create_database(self) -> None:
        import psycopg2

        deadline = time.monotonic() + 30
        while True:
            try:
                conn = psycopg2.connect(host="127.0.0.1", port=self.port, user=USER, password=self.password,
                                        dbname="postgres")  # fmt: skip
                break
            except psycopg2.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if cur.fetchone() is None:
                cur.execute(f"CREATE DATABASE {DATABASE}")
        conn.close()

    def running(self) -> bool:
        done = subprocess.run(self._cmd(str(self.bin / "pg_ctl"), "-D", str(self.data), "status"),
                              capture_output=True)  # fmt: skip
        return done.returncode == 0

    def alive(self) -> bool:
        """Whether the postmaster named in ``postmaster.pid`` runs: no process started, cheap enough to poll."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return False
        return pid_alive(pid)

    def stop(self, timeout: float = 10) -> None:
        """Fast shutdown (sessions ended, no waiting for clients) within ``timeout`` s, then immediate."""
        if not (self.data.exists() and self.running()):
            return
        deadline = time.monotonic() + timeout
        for mode, share in (("fast", 0.7), ("immediate", 1.0)):
            left = max(1.0, deadline - time.monotonic())
            wait = max(1, int(left * share))
            try:
                subprocess.run(
                    self._cmd(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", str(wait),
                              "stop"),
                    check=True, capture_output=True, start_new_session=True, timeout=wait + 1,
                )  # fmt: skip
                return
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                if not self.running():
                    return
        raise RuntimeError(f"PostgreSQL in {self.data} did not stop within {timeout:.0f} s")
