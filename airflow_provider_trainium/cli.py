"""``airflow-trainium``: one entry point, one module per command group.

Each module in ``COMMANDS`` exposes ``register(subparsers)``, which adds its sub-parser and sets
``func`` (taking the parsed args, returning an exit code) on it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMANDS: list[str] = [
    "airflow_provider_trainium.commands.models",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-trainium", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        importlib.import_module(module).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Airflow logs to stdout; a command's stdout is its result (tables, JSON for pipes).
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
