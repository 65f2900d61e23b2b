"""``airflow-trainium models``: list, show, promote, verify and alias history of registered models."""

from __future__ import annotations

import argparse
import functools
import getpass
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_trainium.commands import airflow_arg
from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID

#: Exit codes: 0 success, 1 the command ran and failed (missing model, failed check), 2 bad usage.
EXIT_FAILED = 1
EXIT_USAGE = 2
OUTPUTS = ("table", "json", "yaml", "plain")


@dataclass(frozen=True)
class Option:
    """One argument, declared once for both ``airflow trainium models`` and ``airflow-trainium models``."""

    flags: tuple[str, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


COMMON = (
    Option(("--root",), {"help": "registry root (default: the trainium connection's artifact root)"}),
    Option(("--aws-conn-id",), {"help": "AWS connection for s3:// roots"}),
    Option(("--trainium-conn-id",), {"default": DEFAULT_CONN_ID, "help": "the trainium connection"}),
    Option(
        ("-o", "--output"),
        {"choices": OUTPUTS, "default": "table", "metavar": "(table, json, yaml, plain)", "help": "output format"},
    ),
)
NAME = Option(("name",), {"help": "model name"})
ALIAS = Option(("alias",), {"help": "alias name"})
REF = Option(("ref",), {"help": "NAME, NAME:VERSION or NAME@ALIAS"})


def _subcommands() -> list[tuple[str, str, Callable[[argparse.Namespace], int], tuple[Option, ...]]]:
    return [
        ("list", "models, or the versions of one model", cmd_list,
         (Option(("name",), {"nargs": "?", "help": "model name"}),)),
        ("show", "a version's manifest: NAME, NAME:VERSION or NAME@ALIAS", cmd_show, (REF,)),
        ("promote", "point ALIAS of NAME at VERSION (recorded in the alias history)", cmd_promote,
         (NAME, ALIAS, Option(("version",), {"type": int, "help": "version number"}),
          Option(("--reason",), {"help": "why, kept in the alias history"}))),
        ("verify", "recompute a version's checksums against its manifest", cmd_verify, (REF,)),
        ("history", "every move of an alias, oldest first", cmd_history, (NAME, ALIAS)),
    ]  # fmt: skip


def register(subparsers: Any) -> None:
    """``airflow-trainium models``: the same subcommands and options as ``airflow trainium models``."""
    parser = subparsers.add_parser("models", help="the model registry", description=__doc__)
    sub = parser.add_subparsers(dest="models_command", required=True)
    for name, help_text, func, options in _subcommands():
        p = sub.add_parser(name, help=help_text)
        for option in (*COMMON, *options):
            p.add_argument(*option.flags, **option.kwargs)
        p.add_argument("--json", dest="output", action="store_const", const="json", help="same as --output json")
        p.set_defaults(func=_reporting_errors(func))


def airflow_commands() -> list[Any]:
    """``airflow trainium models ...``: registered through the ``cli`` entry of provider info."""
    from airflow.cli.cli_config import ActionCommand, GroupCommand

    def action(name: str, help_text: str, func: Callable[..., int], options: tuple[Option, ...]) -> Any:
        args = [airflow_arg(o.flags, o.kwargs) for o in (*COMMON, *options)]
        return ActionCommand(name=name, help=help_text, func=_exiting(_reporting_errors(func)), args=args)

    models = GroupCommand(
        name="models",
        help="the model registry",
        subcommands=[action(*sub) for sub in _subcommands()],
        description=__doc__,
    )
    return [GroupCommand(name="trainium", help="AWS Trainium provider commands", subcommands=[models])]


def _exiting(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], None]:
    """Airflow's CLI ignores a command's return value: turn a non-zero one into the exit status."""

    @functools.wraps(func)
    def wrapper(args: argparse.Namespace) -> None:
        code = func(args)
        if code:
            sys.exit(code)

    return wrapper


def _reporting_errors(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """One line on stderr instead of a traceback: exit 2 for a malformed name, 1 for what the registry refuses.

    Airflow's info messages (it logs to stdout) are silenced, so that stdout holds only the result and
    ``--output json`` can be piped.
    """

    @functools.wraps(func)
    def wrapper(args: argparse.Namespace) -> int:
        from airflow_provider_trainium.registry import RegistryError
        from airflow_provider_trainium.registry.names import InvalidNameError

        args.out = getattr(args, "out", None) or sys.stdout
        logging.getLogger("airflow").setLevel(logging.WARNING)
        try:
            return func(args)
        except InvalidNameError as exc:
            print(f"trainium models {func.__name__.removeprefix('cmd_')}: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except (RegistryError, NotFound, ValueError) as exc:
            print(f"trainium models {func.__name__.removeprefix('cmd_')}: error: {exc}", file=sys.stderr)
            return EXIT_FAILED

    return wrapper


def _registry(args: argparse.Namespace) -> Any:
    from airflow_provider_trainium.registry.config import open_registry

    return open_registry(args.root, args.aws_conn_id, args.trainium_conn_id)


def _print(args: argparse.Namespace, data: Any) -> None:
    """Rows (a list of dicts) or one record, in the format of ``--output``, as Airflow's commands print."""
    from airflow.cli.simple_table import AirflowConsole

    console = AirflowConsole(file=args.out)
    if args.output == "json":
        console.print_as_json(data)
    elif args.output == "yaml":
        console.print_as_yaml(data)
    else:
        rows = data if isinstance(data, list) else [data]
        console.print_as(data=[{k: _cell(v) for k, v in row.items()} for row in rows], output=args.output)


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "-"
    return "-" if value is None else str(value)


def _metrics_text(metrics: dict[str, Any]) -> dict[str, Any]:
    shown = [(k, v) for k, v in sorted(metrics.items()) if isinstance(v, int | float) and not isinstance(v, bool)]
    return dict(shown[:4])


def _no_such(what: str) -> NotFound:
    return NotFound(what)


class NotFound(LookupError):
    """A model or alias the command names does not exist (exit 1)."""


def cmd_list(args: argparse.Namespace) -> int:
    registry = _registry(args)
    if args.name is None:
        data = []
        for name in registry.list_models():
            versions = registry.list_versions(name)
            aliases = {a: s.version for a, s in registry.list_aliases(name).items()}
            data.append({"name": name, "versions": len(versions), "latest": versions[-1], "aliases": aliases})
        _print(args, data)
        return 0
    versions = registry.list_versions(args.name)
    if not versions:
        raise _no_such(f"no model {args.name!r}")
    aliases_by_version: dict[int, list[str]] = {}
    for alias, state in registry.list_aliases(args.name).items():
        aliases_by_version.setdefault(state.version, []).append(alias)
    data = []
    for version in versions:
        manifest = registry.get_version(args.name, version).manifest
        source = manifest.get("source") or {}
        data.append(
            {
                "version": version,
                "created_at": manifest.get("created_at"),
                "dag_id": source.get("dag_id"),
                "run_id": source.get("run_id"),
                "aliases": sorted(aliases_by_version.get(version, [])),
                "metrics": manifest.get("metrics") or {} if args.output in ("json", "yaml") else
                _metrics_text(manifest.get("metrics") or {}),
            }
        )  # fmt: skip
    _print(args, data)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    mv = _registry(args).resolve(args.ref, verify=False)  # shows the manifest; `verify` checks the files
    record = {"uri": mv.uri, "manifest_uri": mv.manifest_uri, **mv.manifest}
    human = args.output in ("table", "plain")
    if human:
        args.output = "json"  # a manifest is nested: a table would flatten it beyond use
    _print(args, record)
    if human and isinstance(mv.manifest.get("cost"), dict):
        from airflow_provider_trainium.registry.manifest import cost_text

        print(f"cost: {cost_text(mv.manifest['cost'])}", file=args.out)
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    state = _registry(args).promote(
        args.name,
        args.alias,
        args.version,
        moved_by={"user": getpass.getuser(), "via": "cli"},
        reason=args.reason,
    )
    _print(args, state.to_dict())
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    registry = _registry(args)
    mv = registry.resolve(args.ref, verify=False)  # verify reports the problems itself
    report = registry.verify(mv.name, mv.version)
    data = {
        "name": report.name,
        "version": report.version,
        "files": report.checked,
        "verdict": "OK" if report.ok else "FAILED",
        "problems": report.problems,
    }
    _print(args, data)
    return 0 if report.ok else EXIT_FAILED


def cmd_history(args: argparse.Namespace) -> int:
    registry = _registry(args)
    history = registry.alias_history(args.name, args.alias)
    if not history:
        raise _no_such(f"model {args.name!r} has no alias {args.alias!r}")
    rows = [
        {
            "revision": s.revision,
            "version": s.version,
            "previous": s.previous_version,
            "moved_at": s.moved_at,
            "by": _who(s.moved_by),
        }
        for s in history
    ]
    _print(args, [s.to_dict() for s in history] if args.output in ("json", "yaml") else rows)
    return 0


def _who(moved_by: dict[str, Any]) -> str:
    if moved_by.get("dag_id"):
        return f"{moved_by['dag_id']}/{moved_by.get('run_id')}/{moved_by.get('task_id')}"
    return str(moved_by.get("user") or "-")
