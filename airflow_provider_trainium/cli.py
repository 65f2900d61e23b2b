"""``airflow-trainium``: the provider's command line, one subcommand per module in :data:`COMMANDS`."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: Modules that each expose ``register(subparsers)``; the subparser sets ``func(args) -> int``.
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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:
        print(f"airflow-trainium {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
