"""``airflow-trainium``: the provider's command line, one subcommand per module in :data:`COMMANDS`.

``airflow trainium models`` and ``airflow trainium preflight`` offer the same commands inside Airflow's own CLI
(:func:`airflow_commands`).

Each module exposes ``register(subparsers)``, which adds its sub-parser and sets ``func`` on it: either
``func(args, out) -> int`` (``out`` is the stream for the command's result; everything else goes to
stderr) or ``func(args) -> int`` printing its result to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

COMMANDS: list[str] = [
    "airflow_provider_trainium.commands.configure",
    "airflow_provider_trainium.commands.dags",
    "airflow_provider_trainium.commands.models",
    "airflow_provider_trainium.commands.preflight",
]


def airflow_commands() -> list[Any]:
    """The ``airflow trainium ...`` commands, named by the ``cli`` entry of provider info (Airflow 3.2+)."""
    from airflow_provider_trainium.commands.configure import airflow_command as configure_command
    from airflow_provider_trainium.commands.dags import airflow_command as dags_command
    from airflow_provider_trainium.commands.models import airflow_commands as models_commands
    from airflow_provider_trainium.commands.preflight import airflow_command as preflight_command

    trainium, *others = models_commands()
    subcommands = [*trainium.subcommands, configure_command(), dags_command(), preflight_command()]
    return [trainium._replace(subcommands=subcommands), *others]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow-trainium", description="Commands of the Airflow provider for AWS Trainium."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        importlib.import_module(module).register(subparsers)
    return parser


def logs_to_stderr() -> None:
    """Airflow logs to stdout; a command's stdout is its result (``--dry-run > conn.json``), so move them."""
    import airflow  # noqa: F401  (configures logging on import)

    # The process's own stderr: a replaced sys.stderr (a capture) may be closed before the handler is done.
    stream = sys.__stderr__ or sys.stderr
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler:
            handler.setStream(stream)


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
    args = build_parser().parse_args(argv)
    out = sys.stdout
    logs_to_stderr()
    try:
        if len(inspect.signature(args.func).parameters) >= 2:
            # Loggers that Airflow sets up while the command runs bind sys.stdout then: let them find stderr.
            with contextlib.redirect_stdout(sys.stderr):
                return int(args.func(args, out) or 0)
        return int(args.func(args) or 0)
    except ValueError as err:
        print(f"airflow-trainium {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
