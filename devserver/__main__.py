"""``python -m devserver [up|stop]``: what ``make airflow`` / ``make airflow-stop`` run."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

from devserver.deployment import USERNAME, Deployment, stop_recorded
from devserver.supervisor import Supervisor


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", nargs="?", choices=["up", "stop"], default="up")
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("AIRFLOW_HOME", ".airflow")))
    parser.add_argument("--port", type=int, default=int(os.environ.get("AIRFLOW_PORT", "0")) or None,
                        help="UI port (default 8080, or a free one when taken)")  # fmt: skip
    parser.add_argument("--pg-port", type=int, default=int(os.environ.get("AIRFLOW_PG_PORT", "0")) or None,
                        help="PostgreSQL port on 127.0.0.1 (default: a free one)")  # fmt: skip
    parser.add_argument("--password", default=os.environ.get("AIRFLOW_PASSWORD") or None,
                        help="the admin password (default: $AIRFLOW_PASSWORD, else the one kept from the first "
                             "start, else a random one, printed once)")  # fmt: skip
    parser.add_argument("--grace", type=float, default=30, help="seconds a stop may take (default 30)")
    args = parser.parse_args(argv)
    if args.command == "stop":
        print("stopped" if stop_recorded(args.home.resolve()) else "no deployment running")
        return 0
    if (args.home / "deployment" / "state.json").exists():
        stop_recorded(args.home.resolve())  # a leftover of a killed supervisor
    deployment = Deployment(args.home, ui_port=args.port, pg_port=args.pg_port, password=args.password)
    started = time.perf_counter()
    print(f"starting PostgreSQL and Airflow in {deployment.home} (logs: {deployment.log_dir}) ...", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # `make airflow-stop` while starting: start() cleans up
    try:
        deployment.start()
    except KeyboardInterrupt:
        print("stopped before it was up", flush=True)
        return 130
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    if deployment.password_generated:
        login = f"{USERNAME} / {deployment.password}  (generated; shown only now, kept in {deployment.passwords_file})"
    else:
        login = f"{USERNAME} / the password given or kept in {deployment.passwords_file}"
    print(f"Airflow is up after {time.perf_counter() - started:.0f} s: "
          f"api-server (UI), scheduler, dag-processor, triggerer, log-server; LocalExecutor on PostgreSQL "
          f"127.0.0.1:{deployment.postgres.port}; every listener on 127.0.0.1\n"
          f"  UI:    {deployment.url}\n"
          f"  login: {login}\n"
          f"A component that dies is started again (backoff 1 s doubling to 60 s); the others keep running.\n"
          f"Ctrl-C or `make airflow-stop` stops it.", flush=True)  # fmt: skip
    try:
        Supervisor(deployment).run(stopping)
    finally:
        print("stopping ...", flush=True)
        started = time.perf_counter()
        deployment.stop(grace=args.grace)
        print(f"stopped in {time.perf_counter() - started:.1f} s", flush=True)
    return 0


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
