"""``airflow-trainium``: the provider's command line, one subcommand per module in :data:`COMMANDS`."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import sys
from collections.abc import Sequence

#: Modules that each expose ``register(subparsers)``; the subparser sets ``func(args, out) -> int``, where
#: ``out`` is the stream for the command's result. Everything else a command prints goes to stderr.
COMMANDS: list[str] = [
    "airflow_provider_trainium.commands.configure",
]


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

    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler:
            handler.setStream(sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = sys.stdout
    logs_to_stderr()
    try:
        # Loggers that Airflow sets up while the command runs bind sys.stdout then: let them find stderr.
        with contextlib.redirect_stdout(sys.stderr):
            return args.func(args, out)
    except ValueError as err:
        print(f"airflow-trainium {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
