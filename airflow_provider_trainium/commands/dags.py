"""``airflow-trainium dags install``: copy the shipped DAG files into a DAGs folder or an S3 prefix (MWAA).

Idempotent: a file already there with the same bytes is left alone, so a rerun copies nothing. A file there that
differs (edited in place, or an older release's) is never overwritten without ``--force``; the whole install is
refused before anything is written, naming every such file. Only the DAG files are copied: no trainer, no
Dockerfile, nothing a DAGs folder would parse or a scheduler would run.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from airflow_provider_trainium.commands import airflow_arg
from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID

HELP = "copy the provider's DAGs into a DAGs folder or an s3:// prefix"
DESCRIPTION = (
    "Copy the DAG files shipped with the provider to --to (a folder, or s3://bucket/prefix for MWAA). Files already "
    "there with the same content are left alone; a file that differs is refused unless --force."
)
OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--to",), {"required": True, "metavar": "FOLDER_OR_URI", "help": "DAGs folder, or s3://bucket/prefix"}),
    (("--force",), {"action": "store_true", "help": "replace files there that differ from the shipped ones"}),
    (("--aws-conn-id",), {"help": "AWS connection for s3:// (default: the trainium connection's)"}),
    (("--trainium-conn-id",), {"default": DEFAULT_CONN_ID, "help": "the trainium connection"}),
    (("--dry-run",), {"action": "store_true", "help": "say what would be copied, write nothing"}),
)


class InstallRefused(ValueError):
    """The install cannot go ahead as asked; nothing was written."""


class ChangedFilesRefused(InstallRefused):
    """Files at the destination differ from the shipped ones and ``--force`` was not given."""


class LinkAtDestinationRefused(InstallRefused):
    """A shipped file's name is a symbolic link in the destination folder: writing through it would land wherever
    it points, outside the folder (a dangling link included), so it is refused even with ``--force``."""


@dataclass(frozen=True)
class FileAction:
    """What an install does with one DAG file: ``copy`` (absent there), ``keep`` (same bytes), ``replace``."""

    name: str
    action: str


def shipped_dags() -> dict[str, bytes]:
    """The DAG files the provider ships, by file name."""
    from airflow_provider_trainium.deployment_files import dags_folder

    return {path.name: path.read_bytes() for path in sorted(Path(dags_folder()).glob("*.py"))}


def plan(shipped: dict[str, bytes], destination: Any, *, force: bool) -> list[FileAction]:
    """One action per shipped file; :class:`ChangedFilesRefused` when a file there differs and not ``force``."""
    local = Path(destination.path) if getattr(destination, "protocol", None) in ("file", "local") else destination
    links = [name for name in shipped if isinstance(local, Path) and (local / name).is_symlink()]
    if links:
        raise LinkAtDestinationRefused(
            f"{', '.join(links)} at {destination} is a symbolic link: nothing was copied (remove the link; an install "
            "writes only plain files inside the folder)"
        )
    actions = []
    for name, content in shipped.items():
        target = destination / name
        if not target.exists():
            actions.append(FileAction(name, "copy"))
        elif target.read_bytes() == content:
            actions.append(FileAction(name, "keep"))
        else:
            actions.append(FileAction(name, "replace"))
    changed = [a.name for a in actions if a.action == "replace"]
    if changed and not force:
        raise ChangedFilesRefused(
            f"{len(changed)} file(s) at {destination} differ from the shipped DAGs: {', '.join(changed)}; nothing "
            "was copied (keep your edits in a file of another name, or pass --force to replace them)"
        )
    return actions


def install(destination: Any, *, force: bool = False, dry_run: bool = False) -> list[FileAction]:
    """Copy the shipped DAGs to ``destination`` (an ObjectStoragePath or Path) as :func:`plan` decides."""
    shipped = shipped_dags()
    actions = plan(shipped, destination, force=force)
    if not dry_run:
        if getattr(destination, "protocol", "file") in ("file", "local"):
            # an object store has no folders to make (s3fs would create a missing bucket)
            destination.mkdir(parents=True, exist_ok=True)
        for action in actions:
            if action.action != "keep":
                (destination / action.name).write_bytes(shipped[action.name])
    return actions


def destination_path(args: argparse.Namespace) -> Any:
    from airflow_provider_trainium.artifacts import open_path

    return open_path(args.to, aws_conn_id=args.aws_conn_id, trainium_conn_id=args.trainium_conn_id)


def run(args: argparse.Namespace, out: TextIO) -> int:
    destination = destination_path(args)
    try:
        actions = install(destination, force=args.force, dry_run=args.dry_run)
    except InstallRefused as err:
        print(f"dags install: {err}", file=sys.stderr)
        return 1
    verbs = {"copy": "copied", "keep": "unchanged", "replace": "replaced"}
    if args.dry_run:
        verbs = {"copy": "would copy", "keep": "unchanged", "replace": "would replace"}
    for action in actions:
        print(f"{verbs[action.action]} {destination / action.name}", file=out)
    return 0


def add_install(subparsers: Any) -> None:
    parser = subparsers.add_parser("install", help=HELP, description=DESCRIPTION)
    for flags, kwargs in OPTIONS:
        parser.add_argument(*flags, **kwargs)
    parser.set_defaults(func=run)


def register(subparsers: Any) -> None:
    """``airflow-trainium dags install``."""
    parser = subparsers.add_parser("dags", help="the DAGs shipped with the provider", description=__doc__)
    add_install(parser.add_subparsers(dest="dags_command", required=True))


def airflow_command() -> Any:
    """``airflow trainium dags install``: Airflow's CLI ignores a return value, so a failure exits itself."""
    from airflow.cli.cli_config import ActionCommand, GroupCommand

    def func(args: argparse.Namespace) -> None:
        code = run(args, sys.stdout)
        if code:
            sys.exit(code)

    install_command = ActionCommand(
        name="install",
        help=HELP,
        func=func,
        args=[airflow_arg(flags, kwargs) for flags, kwargs in OPTIONS],
        description=DESCRIPTION,
    )
    return GroupCommand(name="dags", help="the DAGs shipped with the provider", subcommands=[install_command])
