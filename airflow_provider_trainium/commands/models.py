"""``airflow-trainium models``: list, show, promote, verify and alias history of registered models."""

from __future__ import annotations

import argparse
import functools
import getpass
import json
import logging
import sys
from collections.abc import Callable
from typing import Any

from airflow_provider_trainium.hooks.trainium import DEFAULT_CONN_ID


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("models", help="the model registry", description=__doc__)
    parser.add_argument("--root", help="registry root (default: the trainium connection's artifact root)")
    parser.add_argument("--aws-conn-id", help="AWS connection for s3:// roots")
    parser.add_argument("--trainium-conn-id", default=DEFAULT_CONN_ID)
    parser.add_argument("--json", action="store_true", help="print JSON")
    sub = parser.add_subparsers(dest="models_command", required=True)

    p = sub.add_parser("list", help="models, or the versions of one model")
    p.add_argument("name", nargs="?")
    p.set_defaults(func=_reporting_errors(cmd_list))

    p = sub.add_parser("show", help="a version's manifest: NAME, NAME:VERSION or NAME@ALIAS")
    p.add_argument("ref")
    p.set_defaults(func=_reporting_errors(cmd_show))

    p = sub.add_parser("promote", help="point ALIAS of NAME at VERSION (recorded in the alias history)")
    p.add_argument("name")
    p.add_argument("alias")
    p.add_argument("version", type=int)
    p.add_argument("--reason")
    p.set_defaults(func=_reporting_errors(cmd_promote))

    p = sub.add_parser("verify", help="recompute a version's checksums against its manifest")
    p.add_argument("ref")
    p.set_defaults(func=_reporting_errors(cmd_verify))

    p = sub.add_parser("history", help="every move of an alias, oldest first")
    p.add_argument("name")
    p.add_argument("alias")
    p.set_defaults(func=_reporting_errors(cmd_history))


def _reporting_errors(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Refusals (bad names, missing versions) are one line on stderr and exit code 2, not a traceback.

    Airflow's info messages (it logs to stdout) are silenced, so that stdout holds only the result and
    ``--json`` output can be piped.
    """

    @functools.wraps(func)
    def wrapper(args: argparse.Namespace) -> int:
        from airflow_provider_trainium.registry import RegistryError

        args.out = sys.stdout
        logging.getLogger("airflow").setLevel(logging.WARNING)
        try:
            return func(args)
        except (RegistryError, ValueError) as exc:
            print(f"airflow-trainium models: error: {exc}", file=sys.stderr)
            return 2

    return wrapper


def _registry(args: argparse.Namespace) -> Any:
    from airflow_provider_trainium.registry.config import open_registry

    return open_registry(args.root, args.aws_conn_id, args.trainium_conn_id)


def _print(args: argparse.Namespace, data: Any, lines: list[str]) -> None:
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True, default=str), file=args.out)
    else:
        print("\n".join(lines), file=args.out)


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _metrics_text(metrics: dict[str, Any]) -> str:
    shown = [f"{k}={v}" for k, v in sorted(metrics.items()) if isinstance(v, int | float) and not isinstance(v, bool)]
    return " ".join(shown[:4])


def cmd_list(args: argparse.Namespace) -> int:
    registry = _registry(args)
    if args.name is None:
        data = []
        for name in registry.list_models():
            versions = registry.list_versions(name)
            aliases = {a: s.version for a, s in registry.list_aliases(name).items()}
            data.append({"name": name, "versions": len(versions), "latest": versions[-1], "aliases": aliases})
        rows = [["NAME", "VERSIONS", "LATEST", "ALIASES"]] + [
            [
                d["name"],
                str(d["versions"]),
                str(d["latest"]),
                " ".join(f"{a}->{v}" for a, v in d["aliases"].items()),
            ]
            for d in data
        ]
        _print(args, data, _table(rows) if data else ["no models"])
        return 0
    aliases_by_version: dict[int, list[str]] = {}
    for alias, state in registry.list_aliases(args.name).items():
        aliases_by_version.setdefault(state.version, []).append(alias)
    data = []
    for version in registry.list_versions(args.name):
        manifest = registry.get_version(args.name, version).manifest
        source = manifest.get("source") or {}
        data.append(
            {
                "version": version,
                "created_at": manifest.get("created_at"),
                "dag_id": source.get("dag_id"),
                "run_id": source.get("run_id"),
                "metrics": manifest.get("metrics") or {},
                "aliases": sorted(aliases_by_version.get(version, [])),
            }
        )
    rows = [["VERSION", "CREATED", "RUN", "ALIASES", "METRICS"]] + [
        [
            str(d["version"]),
            str(d["created_at"]),
            f"{d['dag_id']}/{d['run_id']}" if d["dag_id"] else "-",
            ",".join(d["aliases"]) or "-",
            _metrics_text(d["metrics"]),
        ]
        for d in data
    ]
    _print(args, data, _table(rows) if data else [f"model {args.name!r} has no versions"])
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    mv = _registry(args).resolve(args.ref, verify=False)  # shows the manifest; `verify` checks the files
    print(json.dumps({"uri": mv.uri, "manifest_uri": mv.manifest_uri, **mv.manifest}, indent=2, sort_keys=True))
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    state = _registry(args).promote(
        args.name,
        args.alias,
        args.version,
        moved_by={"user": getpass.getuser(), "via": "cli"},
        reason=args.reason,
    )
    text = f"{state.name}@{state.alias} -> {state.version}"
    _print(args, state.to_dict(), [f"{text} (revision {state.revision}, was {state.previous_version})"])
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    registry = _registry(args)
    mv = registry.resolve(args.ref, verify=False)  # verify reports the problems itself
    report = registry.verify(mv.name, mv.version)
    data = {
        "name": report.name,
        "version": report.version,
        "files": report.checked,
        "problems": report.problems,
    }
    verdict = "OK" if report.ok else "FAILED"
    _print(args, data, [f"{mv.name}:{mv.version}: {report.checked} files, {verdict}", *report.problems])
    return 0 if report.ok else 1


def cmd_history(args: argparse.Namespace) -> int:
    history = _registry(args).alias_history(args.name, args.alias)
    rows = [["REVISION", "VERSION", "PREVIOUS", "MOVED_AT", "BY"]] + [
        [str(s.revision), str(s.version), str(s.previous_version or "-"), s.moved_at, _who(s.moved_by)] for s in history
    ]
    _print(args, [s.to_dict() for s in history], _table(rows) if history else ["no history"])
    return 0


def _who(moved_by: dict[str, Any]) -> str:
    if moved_by.get("dag_id"):
        return f"{moved_by['dag_id']}/{moved_by.get('run_id')}/{moved_by.get('task_id')}"
    return str(moved_by.get("user") or "-")
