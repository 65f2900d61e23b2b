"""``preflight``: is this layout ready for its first real run? Each check is ok, warning or error with its
reason; the exit status is 1 on any error, so a script or CI step stops before anything is paid for."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import IO, Any

from airflow_provider_trainium.commands import airflow_arg
from airflow_provider_trainium.commands.models import Option
from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID

EXIT_FAILED = 1
OUTPUTS = ("table", "json", "yaml", "plain")
HELP = "check that a layout can run: connection, AWS resources, image, Neuron driver"


def options() -> tuple[Option, ...]:
    """The arguments, declared once for ``airflow trainium preflight`` and ``airflow-trainium preflight``."""
    from airflow_provider_trainium.compute.backends import compute_choices
    from airflow_provider_trainium.neuron.catalog import CATALOG

    return (
        Option(("--instance-type",), {"default": "trn1.2xlarge", "choices": sorted(CATALOG), "help": "instance type"}),
        Option(("--nodes",), {"type": int, "default": 1, "help": "number of instances"}),
        Option(("--compute",), {"default": "auto", "choices": compute_choices(), "help": "compute backend"}),
        Option(
            ("--capacity-reservation",),
            {
                "metavar": "cr-ID",
                "help": "check the queue or cluster the connection's capacity_reservations maps it to",
            },
        ),
        Option(("--image",), {"help": "image to run (default: the connection's; none: the DAG builds one)"}),
        Option(("--conn-id",), {"default": DEFAULT_CONN_ID, "help": "the trainium connection"}),
        Option(
            ("-o", "--output"),
            {"choices": OUTPUTS, "default": "table", "metavar": "(table, json, yaml, plain)", "help": "output format"},
        ),
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("preflight", help=HELP, description=__doc__)
    for option in options():
        parser.add_argument(*option.flags, **option.kwargs)
    parser.set_defaults(func=run)


def airflow_command() -> Any:
    """``airflow trainium preflight``: Airflow's CLI ignores a return value, so a failure exits itself."""
    from airflow.cli.cli_config import ActionCommand

    def func(args: argparse.Namespace) -> None:
        code = run(args, sys.stdout)
        if code:
            sys.exit(code)

    args = [airflow_arg(o.flags, o.kwargs) for o in options()]
    return ActionCommand(name="preflight", help=HELP, func=func, args=args, description=__doc__)


def results_for(args: argparse.Namespace) -> list[Any]:
    """The checks for the command's layout; a connection that cannot be read is the one error."""
    from airflow_provider_trainium.hooks.trainium import TrainiumHook
    from airflow_provider_trainium.preflight import run_preflight
    from airflow_provider_trainium.preflight.neuron import check_layout_rules
    from airflow_provider_trainium.preflight.result import error

    try:
        config = TrainiumHook(trainium_conn_id=args.conn_id).get_config()
    except Exception as err:  # an unknown connection id, extras the schema refuses
        return [check_layout_rules(args.instance_type, args.nodes), error("connection", f"{args.conn_id}: {err}")]
    return run_preflight(
        config,
        instance_type=args.instance_type,
        nodes=args.nodes,
        compute=args.compute,
        image=args.image,
        capacity_reservation=getattr(args, "capacity_reservation", None),
    )


def run(args: argparse.Namespace, out: IO[str]) -> int:
    from airflow.cli.simple_table import AirflowConsole

    from airflow_provider_trainium.preflight import errors

    logging.getLogger("airflow").setLevel(logging.WARNING)  # stdout holds only the result: -o json pipes
    results = results_for(args)
    AirflowConsole(file=out).print_as(data=[r.to_dict() for r in results], output=args.output)
    return EXIT_FAILED if errors(results) else 0
