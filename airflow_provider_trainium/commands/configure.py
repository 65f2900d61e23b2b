"""``airflow-trainium configure``: point the ``trainium`` connection at deployed CloudFormation stacks."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from airflow_provider_trainium.commands import airflow_arg
from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID

CONN_TYPE = "trainium"


HELP = "create or update the trainium connection from CloudFormation stack outputs"
DESCRIPTION = (
    "Read the outputs of the stacks deployed from cloudformation/ and write the trainium connection that the "
    "operators use (the Neuron driver the stacks pin included). Pass the base stack and the ECS and/or Batch stacks."
)
#: (flags, argparse keyword arguments) of every option, shared by ``airflow-trainium`` and ``airflow trainium``.
OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (
        ("--stack",),
        {
            "action": "append",
            "required": True,
            "metavar": "NAME",
            "help": "a deployed stack (repeat: --stack base --stack ecs --stack batch)",
        },
    ),
    (
        ("--aws-conn-id",),
        {
            "default": "aws_default",
            "help": "Airflow AWS connection used to read the stacks and stored in the trainium connection",
        },
    ),
    (("--region",), {"help": "region of the stacks (default: the AWS connection's region)"}),
    (("--conn-id",), {"default": DEFAULT_CONN_ID, "help": "id of the connection to write"}),
    (("--image",), {"help": "default training image (repository@sha256:digest or :tag)"}),
    (("--dry-run",), {"action": "store_true", "help": "print the connection as JSON, write nothing"}),
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("configure", help=HELP, description=DESCRIPTION)
    for flags, kwargs in OPTIONS:
        parser.add_argument(*flags, **kwargs)
    parser.set_defaults(func=run)


def airflow_command() -> Any:
    """``airflow trainium configure``: Airflow's CLI ignores a return value, so a failure exits itself."""
    from airflow.cli.cli_config import ActionCommand

    def func(args: argparse.Namespace) -> None:
        try:
            code = run(args, sys.stdout)
        except ValueError as err:  # a missing stack or output: one line, as airflow-trainium prints it
            print(f"airflow trainium configure: {err}", file=sys.stderr)
            code = 2
        if code:
            sys.exit(code)

    args = [airflow_arg(flags, kwargs) for flags, kwargs in OPTIONS]
    return ActionCommand(name="configure", help=HELP, func=func, args=args, description=DESCRIPTION)


def build_connection(args: argparse.Namespace) -> dict[str, Any]:
    """The connection as ``airflow connections import`` reads it: conn_type and extra."""
    from airflow_provider_trainium.stack import connection_extra, read_stack_outputs

    per_stack = [(name, read_stack_outputs(name, args.aws_conn_id, args.region)) for name in args.stack]
    extra = connection_extra(per_stack, aws_conn_id=args.aws_conn_id, image=args.image)
    return {
        "conn_type": CONN_TYPE,
        "description": f"Trainium stacks {', '.join(args.stack)}",
        "extra": extra,
    }


def save_connection(conn_id: str, connection: dict[str, Any]) -> bool:
    """Create or update the connection in the metadata database; True when it was created."""
    from airflow.models import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    extra = json.dumps(connection["extra"], sort_keys=True)
    with create_session() as session:
        existing = session.scalar(select(Connection).where(Connection.conn_id == conn_id).limit(1))
        if existing is None:
            session.add(
                Connection(
                    conn_id=conn_id,
                    conn_type=connection["conn_type"],
                    description=connection["description"],
                    extra=extra,
                )
            )
            return True
        existing.conn_type = connection["conn_type"]
        existing.description = connection["description"]
        existing.set_extra(extra)
        return False


def run(args: argparse.Namespace, out: TextIO) -> int:
    connection = build_connection(args)
    extra = connection["extra"]
    if not extra.get("ecs_cluster") and not extra.get("batch_job_queues"):
        print(
            "warning: no ECS cluster and no Batch queue among these stacks; add --stack for the ECS or Batch "
            "stack to run jobs remotely",
            file=sys.stderr,
        )
    if args.dry_run:
        print(json.dumps({args.conn_id: connection}, indent=2, sort_keys=True), file=out)
        return 0
    created = save_connection(args.conn_id, connection)
    verb = "created" if created else "updated"
    print(f"{verb} connection {args.conn_id} from stacks {', '.join(args.stack)}", file=out)
    return 0
