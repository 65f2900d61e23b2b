"""Entry point of every node of a multi-node job: torchrun with the rendezvous AWS Batch gives us.

Batch sets ``AWS_BATCH_JOB_NUM_NODES``, ``AWS_BATCH_JOB_NODE_INDEX`` and ``AWS_BATCH_JOB_MAIN_NODE_INDEX`` on
every node, and ``AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS`` on the children only: the main node uses its
own address. ``--nproc-per-node`` is always explicit (from the argument or ``TRAINIUM_INSTANCE_TYPE``): a
missing value would silently train on one NeuronCore per node.

    python -m trainer.launch --nodes 4 --nproc-per-node 32 --module trainer.allreduce -- --size-mb 64

Runs inside the container, so it imports neither Airflow nor the provider (nor torch: it only execs torchrun).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Mapping

#: NeuronCores per instance (processes per node); mirrors the provider's instance catalog.
NEURON_CORES: dict[str, int] = {
    "trn1.2xlarge": 2,
    "trn1.32xlarge": 32,
    "trn1n.32xlarge": 32,
    "trn2.48xlarge": 64,
}
DEFAULT_MASTER_PORT = 41000
EXIT_BAD_INPUT = 65


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
            return sock.getsockname()[0]
        except OSError:
            return address or "127.0.0.1"


def nproc_per_node(explicit: int | None, env: Mapping[str, str]) -> int:
    if explicit is not None:
        if explicit < 1:
            raise LaunchError(f"--nproc-per-node must be >= 1, got {explicit}")
        return explicit
    instance_type = _require(env, "TRAINIUM_INSTANCE_TYPE", "or pass --nproc-per-node")
    if instance_type not in NEURON_CORES:
        raise LaunchError(f"TRAINIUM_INSTANCE_TYPE={instance_type!r} is not one of {', '.join(sorted(NEURON_CORES))}")
    return NEURON_CORES[instance_type]


def rendezvous(nodes: int, env: Mapping[str, str]) -> tuple[int, str]:
    """(node_rank, master_addr) for this node of a ``nodes``-node job."""
    if nodes == 1:
        return 0, "127.0.0.1"
    why = "set by AWS Batch on multi-node parallel jobs"
    num_nodes = _int_var(env, "AWS_BATCH_JOB_NUM_NODES", why)
    if num_nodes != nodes:
        raise LaunchError(f"AWS_BATCH_JOB_NUM_NODES={num_nodes} but the job was built for --nodes={nodes}")
    node_index = _int_var(env, "AWS_BATCH_JOB_NODE_INDEX", why)
    main_index = _int_var(env, "AWS_BATCH_JOB_MAIN_NODE_INDEX", why)
    if not (0 <= node_index < nodes and 0 <= main_index < nodes):
        raise LaunchError(f"node index {node_index} / main node index {main_index} outside 0..{nodes - 1}")
    if node_index == main_index:
        return node_index, own_address()  # Batch gives the main node no MAIN_NODE address
    return node_index, _require(env, "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", "set by AWS Batch on child nodes")


def build_command(argv: list[str], env: Mapping[str, str], python: str = sys.executable) -> list[str]:
    """The torchrun command this node runs."""
    args, rest = parse_args(argv)
    node_rank, master_addr = rendezvous(args.nodes, env)
    port = args.master_port or int(env.get("TRAINIUM_MASTER_PORT") or DEFAULT_MASTER_PORT)
    return [
        python,
        "-m",
        "torch.distributed.run",
        f"--nnodes={args.nodes}",
        f"--node_rank={node_rank}",
        f"--nproc_per_node={nproc_per_node(args.nproc_per_node, env)}",
        f"--master_addr={master_addr}",
        f"--master_port={port}",
        "--module",
        args.module,
        *rest,
    ]


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m trainer.launch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, required=True, help="nodes the job was built for")
    parser.add_argument("--nproc-per-node", type=int, default=None, help="default: from TRAINIUM_INSTANCE_TYPE")
    parser.add_argument("--master-port", type=int, default=None)
    parser.add_argument("--module", required=True, help="the trainer module each rank runs")
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
        print(f"trainer.launch: {err}", file=sys.stderr, flush=True)
        sys.exit(EXIT_BAD_INPUT)
    if parse_args(argv)[0].dry_run:
        print(json.dumps(command))
        return
    print("trainer.launch: " + " ".join(command), flush=True)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
