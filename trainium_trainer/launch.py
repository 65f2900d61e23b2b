"""Entry point of every training container (the image's ENTRYPOINT) and of every local job's node.

The backends send only this launcher's arguments; it turns them and the node's environment into the torchrun
command and execs it. ``--nproc-per-node`` always comes from the job (the provider knows the instance type's
NeuronCores): a missing value would silently train on one core per node.

    python -m trainium_trainer.launch --nodes=4 --nproc-per-node=32 --module=trainium_trainer.allreduce -- --size-mb 64
    python -m trainium_trainer.launch --nodes=1 --nproc-per-node=2 --command --user-code -- python train.py --epochs 3

``--command`` runs the words after ``--`` instead of a module (each torchrun process runs them: torchrun's
``--no-python``; a leading ``python`` is this interpreter, the image's). ``--user-code`` gives the job local
output, checkpoint and code folders that are restored and uploaded around it (``trainium_trainer.job_dirs``): the
launcher then stays the job's parent instead of exec-ing torchrun.

The rendezvous is one neutral contract: ``TRAINIUM_NUM_NODES``, ``TRAINIUM_NODE_RANK``, ``TRAINIUM_MAIN_ADDR``
and optionally ``TRAINIUM_MAIN_PORT`` (default 41000). A backend either sets them (local compute) or its
platform's own variables are mapped onto them here by one adapter in ``PLATFORM_ADAPTERS``: AWS Batch sets
``AWS_BATCH_JOB_NUM_NODES``, ``AWS_BATCH_JOB_NODE_INDEX`` and ``AWS_BATCH_JOB_MAIN_NODE_INDEX`` on every node, and
``AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS`` on the children only: the main node uses its own address.
``TRAINIUM_RANK_LOG_DIR`` (local compute) tees torchrun's per-rank log files to the console.
Next to the job (torchrun, or its one process when not ``distributed``), each node runs its device/host sampler
(``trainium_trainer.common.monitor``) into the metrics stream.
``--dry-run`` or ``TRAINIUM_LAUNCH_DRY_RUN=1`` prints the command as JSON and exits 0 instead of running it.

Runs inside the container, so it imports neither Airflow nor the provider (nor torch: it only execs torchrun).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping

from trainium_trainer import boundary
from trainium_trainer.boundary import EXIT_BAD_INPUT

DEFAULT_MASTER_PORT = boundary.DEFAULT_MAIN_PORT
NUM_NODES, NODE_RANK, MAIN_ADDR, MAIN_PORT = boundary.RENDEZVOUS_ENV
#: Earlier names of the main address and port, still read when the neutral ones are absent.
LEGACY_NAMES = {MAIN_ADDR: boundary.ENV_LEGACY_MAIN_ADDR, MAIN_PORT: boundary.ENV_LEGACY_MAIN_PORT}
#: Which platform adapter filled in the neutral variables (named in error messages).
RENDEZVOUS_FROM = boundary.ENV_RENDEZVOUS_FROM


class LaunchError(Exception):
    """The node's environment does not describe a runnable job; the message names what is missing."""


def _require(env: Mapping[str, str], name: str, why: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise LaunchError(f"{name} is not set ({why})")
    return value


def _int_var(env: Mapping[str, str], name: str, why: str) -> int:
    value = _require(env, name, why)
    try:
        return int(value)
    except ValueError:
        raise LaunchError(f"{name}={value!r} is not an integer") from None


def own_address() -> str:
    """This host's private address (what ``hostname -i`` prints), for the main node's rendezvous."""
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        address = ""
    if address and not address.startswith("127."):
        return address
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 1))  # no packet is sent; picks the outgoing interface
            picked: str = sock.getsockname()[0]  # an AF_INET socket's name is (host, port)
            return picked
        except OSError:
            return address or "127.0.0.1"


def from_aws_batch(env: Mapping[str, str]) -> dict[str, str] | None:
    """AWS Batch multi-node parallel job -> the neutral contract; None on any other platform."""
    if not env.get("AWS_BATCH_JOB_NUM_NODES", "").strip():
        return None
    why = "set by AWS Batch on multi-node parallel jobs"
    num_nodes = _int_var(env, "AWS_BATCH_JOB_NUM_NODES", why)
    node_index = _int_var(env, "AWS_BATCH_JOB_NODE_INDEX", why)
    main_index = _int_var(env, "AWS_BATCH_JOB_MAIN_NODE_INDEX", why)
    if not (0 <= node_index < num_nodes and 0 <= main_index < num_nodes):
        raise LaunchError(f"node index {node_index} / main node index {main_index} outside 0..{num_nodes - 1}")
    mapped = {NUM_NODES: str(num_nodes), NODE_RANK: str(node_index)}
    if not (env.get(MAIN_ADDR, "") or env.get(LEGACY_NAMES[MAIN_ADDR], "")).strip():
        if node_index == main_index:
            mapped[MAIN_ADDR] = own_address()  # Batch gives the main node no MAIN_NODE address
        else:
            mapped[MAIN_ADDR] = _require(
                env, "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", "set by AWS Batch on child nodes"
            )
    return mapped


#: platform -> adapter from its variables to the neutral contract. A new platform adds one line here.
PLATFORM_ADAPTERS: dict[str, Callable[[Mapping[str, str]], dict[str, str] | None]] = {"aws-batch": from_aws_batch}


def neutral_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the neutral rendezvous filled in from the platform's variables when the backend set none."""
    merged = dict(env)
    for neutral, legacy in LEGACY_NAMES.items():
        if not merged.get(neutral, "").strip() and merged.get(legacy, "").strip():
            merged[neutral] = merged[legacy]
    if merged.get(NUM_NODES, "").strip():
        return merged
    for platform, adapter in PLATFORM_ADAPTERS.items():
        mapped = adapter(merged)
        if mapped is not None:
            return {**merged, **mapped, RENDEZVOUS_FROM: platform}
    return merged


def rendezvous(nodes: int, env: Mapping[str, str]) -> tuple[int, str]:
    """(node_rank, main address) for this node of a ``nodes``-node job, from the neutral contract."""
    if nodes == 1:  # a one-node job needs no platform: loopback unless the backend pinned an address
        return 0, (env.get(MAIN_ADDR, "") or env.get(LEGACY_NAMES[MAIN_ADDR], "")).strip() or "127.0.0.1"
    env = neutral_environment(env)
    why = "the backend sets it on every node of a multi-node job; on AWS Batch it comes from AWS_BATCH_JOB_NUM_NODES"
    num_nodes = _int_var(env, NUM_NODES, why)
    if num_nodes != nodes:
        source = f" (from {env[RENDEZVOUS_FROM]})" if env.get(RENDEZVOUS_FROM) else ""
        raise LaunchError(f"{NUM_NODES}={num_nodes}{source} but the job was built for --nodes={nodes}")
    node_rank = _int_var(env, NODE_RANK, why)
    if not 0 <= node_rank < nodes:
        raise LaunchError(f"{NODE_RANK}={node_rank} outside 0..{nodes - 1}")
    return node_rank, _require(env, MAIN_ADDR, why)


def build_command(argv: list[str], env: Mapping[str, str], python: str = sys.executable) -> list[str]:
    """The command this node runs: torchrun, or ``python -m <module>`` for a single-process job."""
    args, rest = parse_args(argv)
    if args.nodes < 1:
        raise LaunchError(f"--nodes must be >= 1, got {args.nodes}")
    wrap = list(args.wrap or [])
    if args.command:
        if not rest:
            raise LaunchError("--command needs the command after --")
        if rest[0] == "python":  # the image's python: this interpreter
            rest = [python, *rest[1:]]
    elif not args.module:
        raise LaunchError("--module (or --command) is required")
    target = ["--no-python", *rest] if args.command else ["--module", args.module, *rest]
    if args.single_process:
        if args.nodes != 1:
            raise LaunchError(f"--single-process runs on one node, got --nodes={args.nodes}")
        return [*wrap, *rest] if args.command else [*wrap, python, "-m", args.module, *rest]
    if args.nproc_per_node is None:
        raise LaunchError("--nproc-per-node is required for a torchrun job (or pass --single-process)")
    if args.nproc_per_node < 1:
        raise LaunchError(f"--nproc-per-node must be >= 1, got {args.nproc_per_node}")
    node_rank, master_addr = rendezvous(args.nodes, env)
    port = args.master_port or _int_or_default(neutral_environment(env), MAIN_PORT, DEFAULT_MASTER_PORT)
    logs: list[str] = []
    log_dir = env.get(boundary.ENV_RANK_LOG_DIR, "").strip()
    if log_dir:
        # --tee prefixes every rank's console line with its local rank; the per-rank files keep the whole output
        logs = ["--tee=3", "--redirects=3", f"--log-dir={log_dir}"]
    # One host at a loopback address: the rendezvous store listens there only (see trainium_trainer.loopback_torchrun).
    runner = "trainium_trainer.loopback_torchrun" if is_loopback(master_addr) else "torch.distributed.run"
    return [
        *wrap,
        python,
        "-m",
        runner,
        *logs,
        f"--nnodes={args.nodes}",
        f"--node_rank={node_rank}",
        f"--nproc_per_node={args.nproc_per_node}",
        f"--master_addr={master_addr}",
        f"--master_port={port}",
        *target,
    ]


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _int_or_default(env: Mapping[str, str], name: str, default: int) -> int:
    return _int_var(env, name, "") if env.get(name, "").strip() else default


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m trainium_trainer.launch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, required=True, help="nodes the job was built for")
    parser.add_argument("--nproc-per-node", type=int, default=None, help="processes (NeuronCores) per node")
    parser.add_argument("--single-process", action="store_true", help="run the module once, without torchrun")
    parser.add_argument("--wrap", action="append", help="a command word put in front (neuron_parallel_compile)")
    parser.add_argument("--master-port", type=int, default=None, help=f"default: {MAIN_PORT} or {DEFAULT_MASTER_PORT}")
    parser.add_argument("--module", default=None, help="the trainer module each rank runs")
    parser.add_argument("--command", action="store_true", help="run the words after -- instead of a module")
    parser.add_argument("--user-code", action="store_true", help="local output/checkpoint/code folders, synced")
    parser.add_argument("--all-nodes-outputs", action="store_true", help="keep every node's folders, not node 0's")
    parser.add_argument("--dry-run", action="store_true", help="print the command as JSON instead of running it")
    if "--" in argv:
        at = argv.index("--")
        own, rest = argv[:at], argv[at + 1 :]
    else:
        own, rest = argv, []
    return parser.parse_args(own), rest


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        command = build_command(argv, os.environ)
    except LaunchError as err:
        print(f"trainium_trainer.launch: {err}", file=sys.stderr, flush=True)
        sys.exit(EXIT_BAD_INPUT)
    if parse_args(argv)[0].dry_run or os.environ.get(boundary.ENV_LAUNCH_DRY_RUN) == "1":
        print(json.dumps(command))
        return
    args = parse_args(argv)[0]
    if args.user_code:
        sys.exit(run_user_code(argv, args, command))
    print("trainium_trainer.launch: " + " ".join(command), flush=True)
    start_monitor(argv, os.environ)
    os.execvp(command[0], command)


def run_user_code(argv: list[str], args: argparse.Namespace, command: list[str]) -> int:
    """A user's job: its folders prepared, the command run in its output folder, the folders uploaded after."""
    from trainium_trainer import job_dirs, metric_lines

    node = 0 if args.nodes == 1 else rendezvous(args.nodes, os.environ)[0]
    dirs = job_dirs.job_dirs(os.environ, node, args.all_nodes_outputs)
    try:
        job_dirs.prepare(dirs)
    except Exception as err:  # noqa: BLE001 - a missing bundle or an unreadable checkpoint: say which
        print(f"trainium_trainer.launch: could not prepare the job's folders under {dirs.root}: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    env = {**os.environ, **dirs.environment(os.environ)}
    command = [job_dirs.in_code_folder(word, dirs) for word in command]
    print("trainium_trainer.launch: " + " ".join(command) + f" (in {dirs.output})", flush=True)
    start_monitor(argv, env)
    lines = metric_lines.from_env(env) if node == 0 else None  # one node's output makes the job's curves
    return job_dirs.run(command, env, dirs, lines=lines)


def monitor_command(argv: list[str], env: Mapping[str, str], python: str = sys.executable) -> list[str] | None:
    """The node's device/host sampler (``trainium_trainer.common.monitor``), or None when there is nothing to write to.

    It writes under the trainer's ``--output-uri`` (or ``TRAINIUM_OUTPUT_URI``) and watches this process: the
    launcher becomes torchrun or the single process (exec keeps the pid), or stays the parent of a user's job, so
    the sampler stops when the job ends. Every job gets one, ``distributed=False`` included, but for the project's
    own single-process steps (a ``trainium_trainer`` module without ``--user-code``: data preparation, evaluation),
    whose output folders are data that later steps read, compile trials, and ``TRAINIUM_MONITOR=0``.
    """
    args, rest = parse_args(argv)
    output = env.get(boundary.ENV_OUTPUT_URI, "").strip()
    for i, word in enumerate(rest):
        if word == "--output-uri" and i + 1 < len(rest):
            output = rest[i + 1]
        elif word.startswith("--output-uri="):
            output = word.split("=", 1)[1]
    if not output or env.get(boundary.ENV_MONITOR, "1") == "0":
        return None
    if args.single_process and not args.user_code:
        return None
    if args.wrap or "--compile-only" in rest:
        return None
    node = 0 if args.nodes == 1 else rendezvous(args.nodes, env)[0]
    return [python, "-m", "trainium_trainer.common.monitor", f"--output-uri={output}", f"--node={node}",
            f"--parent={os.getpid()}"]  # fmt: skip


def start_monitor(argv: list[str], env: Mapping[str, str]) -> None:
    """Start the sampler in the background; a sampler that cannot start never stops the job."""
    try:
        command = monitor_command(argv, env)
        if command:
            subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True)
    except (LaunchError, OSError) as err:
        print(f"trainium_trainer.launch: the node monitor did not start ({err}); training goes on", file=sys.stderr)


if __name__ == "__main__":
    main()
