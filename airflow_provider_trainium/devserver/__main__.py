"""``python -m airflow_provider_trainium.devserver [up|stop]``: what ``make airflow`` / ``make airflow-stop`` run."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

from airflow_provider_trainium.devserver.deployment import USERNAME, Deployment, stop_recorded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", nargs="?", choices=["up", "stop"], default="up")
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("AIRFLOW_HOME", ".airflow")))
    parser.add_argument("--port", type=int, default=int(os.environ.get("AIRFLOW_PORT", "0")) or None,
                        help="UI port (default 8080, or a free one when taken)")  # fmt: skip
    parser.add_argument("--pg-port", type=int, default=int(os.environ.get("AIRFLOW_PG_PORT", "0")) or None,
                        help="PostgreSQL port on 127.0.0.1 (default: a free one)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.command == "stop":
        print("stopped" if stop_recorded(args.home.resolve()) else "no deployment running")
        return 0
    if (args.home / "deployment" / "state.json").exists():
        stop_recorded(args.home.resolve())  # a leftover of a killed supervisor
    deployment = Deployment(args.home, ui_port=args.port, pg_port=args.pg_port,
                            password=os.environ.get("AIRFLOW_PASSWORD"))  # fmt: skip
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
    print(f"Airflow is up after {time.perf_counter() - started:.0f} s: "
          f"api-server (UI), scheduler, dag-processor, triggerer; LocalExecutor on PostgreSQL "
          f"127.0.0.1:{deployment.postgres.port}\n"
          f"  UI:    {deployment.url}\n"
          f"  login: {USERNAME} / {deployment.password}\n"
          f"Ctrl-C or `make airflow-stop` stops it.", flush=True)  # fmt: skip
    try:
        while not stopping.wait(2):
            for name, proc in deployment.procs.items():
                if proc.poll() is not None:
                    print(f"{name} exited with {proc.returncode}; stopping\n{deployment.tail(name)}", file=sys.stderr)
                    stopping.set()
    finally:
        print("stopping ...", flush=True)
        deployment.stop()
        print("stopped", flush=True)
    return 0


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
