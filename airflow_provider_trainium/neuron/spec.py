"""The job spec: everything a backend needs to run one training job, and its validation.

Validation runs before anything paid starts, and every message names the field and what is allowed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from airflow_provider_trainium.neuron.catalog import CATALOG, InstanceType
from trainium_trainer import boundary

Workload = Literal["default", "llm"]
WORKLOADS: tuple[str, ...] = ("default", "llm")
URI_SCHEMES: tuple[str, ...] = ("file", "s3")
MAX_TIMEOUT_SECONDS = 14 * 24 * 3600  # AWS Batch and ECS both cap jobs at two weeks

#: Tensor-parallel sizes neuronx-distributed cannot place on an instance type, with the reason. trn2 runs at
#: logical NeuronCore size 2 (64 logical cores), where ``parallel_state.get_logic_chosen`` lists TP=8 (8 groups
#: of 8) under "Not Supported" (neuronx-distributed v2.28.0, parallel_layers/parallel_state.py L341-388) and
#: falls back to a replica-group layout that does not work instead of raising.
UNSUPPORTED_TENSOR_PARALLEL: dict[tuple[str, int], str] = {
    ("trn2.48xlarge", 8): (
        "tensor_parallel_size=8 on trn2.48xlarge is not supported: at logical NeuronCore size 2 (64 cores) "
        "neuronx-distributed cannot build the 8x8 replica groups (parallel_state.get_logic_chosen, 'Not Supported'); "
        "use tensor_parallel_size 4, 16, 32 or 64"
    ),
}

_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")
#: An EC2 Capacity Reservation or Capacity Block id (the connection schema's ``CAPACITY_RESERVATION_ID``).
CAPACITY_RESERVATION_RE = re.compile(r"^cr-[0-9a-f]{8,17}$")

#: What a job's env may not set, because the contract or the platform sets it: what runs and where it looks for
#: code (``PATH``, ``PYTHONPATH``, the dynamic loader), torchrun's per-rank variables, and what AWS Batch and ECS
#: set in the container. ``USER_ENV_DENIED_PREFIXES`` adds ``AWS_`` for a task's own ``env``: credentials come
#: from the job's role (or ``secrets``), never from a value in a DAG; local compute's provider-set AWS
#: variables are not a task's.
ENV_DENIED_NAMES: frozenset[str] = frozenset(
    {
        "PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONNOUSERSITE",
        "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT",
        "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
        "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NEURON_RT_VISIBLE_CORES",
    }
)  # fmt: skip
ENV_DENIED_PREFIXES: tuple[str, ...] = ("AWS_BATCH_", "AWS_CONTAINER_", "ECS_", "TORCHELASTIC_")
#: What makes the dynamic loader, Python or a shell load code or files of the caller's choosing, refused by family in
#: a task's own ``env``: every ``LD_*`` and ``PYTHON*`` (the provider sets the ones a job needs, such as
#: ``PYTHONUNBUFFERED``), the shells' startup files, and the rest of the variables glibc drops for set-user-id
#: programs (``sysdeps/generic/unsecvars.h``) that name files it loads.
USER_ENV_DENIED_PREFIXES: tuple[str, ...] = ("AWS_", "LD_", "PYTHON", *ENV_DENIED_PREFIXES)
USER_ENV_DENIED_NAMES: frozenset[str] = frozenset(
    {"BASH_ENV", "ENV", "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH",
     "MALLOC_TRACE", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS",
     # set by the provider for every job (the trainer's input rule, the job's evidence key): a task's env must not
     # replace them
     boundary.ENV_ALLOWED_INPUT_PREFIXES, boundary.ENV_EVIDENCE_KEY, boundary.ENV_METRIC_PATTERNS,
     boundary.ENV_PROFILE_STEPS}
)  # fmt: skip
#: Set by the backends, the container plan and the launcher for every node; a job's env must never override them.
ENV_RESERVED: frozenset[str] = frozenset(
    {
        *boundary.RENDEZVOUS_ENV, boundary.ENV_LEGACY_MAIN_ADDR, boundary.ENV_LEGACY_MAIN_PORT,
        boundary.ENV_RANK_LOG_DIR, boundary.ENV_LAUNCH_DRY_RUN, boundary.ENV_JOB_NAME, boundary.ENV_JOB_HASH,
        boundary.ENV_INSTANCE_TYPE, boundary.ENV_PEAK_FLOPS, boundary.ENV_STACK, boundary.ENV_RENDEZVOUS_FROM,
        boundary.ENV_CODE_URI, boundary.ENV_JOB_DIR, boundary.ENV_OUTPUT_DIR, boundary.ENV_CHECKPOINT_DIR,
        boundary.ENV_CODE_DIR, boundary.ENV_OUTPUT_URI, boundary.ENV_CHECKPOINT_URI,
    }
)  # fmt: skip


def env_name_problem(name: str, *, user: bool = False) -> str | None:
    """Why a job may not set ``name`` (None when it may). ``user``: the name comes from a task's own ``env`` (or
    ``secrets``), which may not set ``AWS_*`` either."""
    if not _ENV_NAME_RE.match(name):
        return f"env name {name!r} is not a valid environment variable name"
    if name in ENV_RESERVED:
        return f"env name {name!r} is set by the backend for every node; a job may not set it"
    denied_prefixes = USER_ENV_DENIED_PREFIXES if user else ENV_DENIED_PREFIXES
    denied_names = ENV_DENIED_NAMES | USER_ENV_DENIED_NAMES if user else ENV_DENIED_NAMES
    if name in denied_names or name.startswith(denied_prefixes):
        return (
            f"env name {name!r} is not allowed: a job may set any variable but "
            f"{', '.join(sorted(denied_names))} and names starting with "
            f"{', '.join(p + '*' for p in denied_prefixes)} (docs/byo.md, 'Environment and secrets')"
        )
    return None


def runs_user_code(command: Sequence[str], entry_point: str) -> bool:
    """Whether a job runs a user's program (a command, or a module outside the project's trainer package): the
    one rule the spec, the compile step and ``metric_patterns`` go by."""
    return bool(command) or not entry_point.startswith("trainium_trainer.")


class JobSpecError(ValueError):
    """A job spec that must not run. The message lists every problem found."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid job spec: " + "; ".join(problems))


@dataclass(frozen=True)
class JobSpec:
    """One training (or data, compile, evaluation) job on Trainium or its local stand-in.

    ``entry_point`` is a Python module run with ``python -m`` (inside torchrun when ``distributed``).
    ``processes_per_node`` defaults to the instance's NeuronCores: a missing value would silently train
    on one core per node. ``stack`` is the training stack the image carries (``trainium_trainer.boundary.STACKS``,
    resolved already: ``auto`` is the operator's and the DAGs' word); the release table says which families
    it trains on.
    """

    name: str
    entry_point: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    instance_type: str = "trn1.2xlarge"
    nodes: int = 1
    processes_per_node: int | None = None
    tensor_parallel_size: int = 1
    distributed: bool = True
    workload: Workload = "default"
    image: str | None = None
    timeout_seconds: int = 24 * 3600
    checkpoint_uri: str | None = None
    output_uri: str | None = None
    #: Command words put in front of each node's command, e.g. ``("neuron_parallel_compile",)``.
    wrapper: tuple[str, ...] = ()
    stack: str = boundary.STACK_XLA
    #: A command to run instead of ``entry_point`` (``("python", "train.py")``, ``("bash", "run.sh")``), then
    #: ``args``; under torchrun each process runs it (torchrun ``--no-python``).
    command: tuple[str, ...] = ()
    #: The job's code bundle (``neuron.code_bundle``): copied into each node's code folder, first on PYTHONPATH.
    code_uri: str | None = None
    #: name -> reference (a Secrets Manager ARN, an SSM parameter ARN or ``ssm:<name>``): the value reaches the
    #: process only, never the spec, a definition's environment, a log or XCom (``neuron.secrets``).
    secrets: dict[str, str] = field(default_factory=dict)
    #: Keep every node's output and checkpoint folder (under ``node-<i>/``); default: node 0's only.
    all_nodes_outputs: bool = False
    #: The EC2 Capacity Reservation (``cr-...``) the job runs on: the backend sends it to the queue or cluster the
    #: connection's ``capacity_reservations`` maps it to (``compute.reservations``); None: the default ones.
    capacity_reservation: str | None = None

    @property
    def runs_user_code(self) -> bool:
        """A user's command or module: the launcher gives it local output and checkpoint folders that it uploads
        (the project's own ``trainium_trainer.*`` modules write to their URIs themselves)."""
        return runs_user_code(self.command, self.entry_point)

    @property
    def instance(self) -> InstanceType:
        return CATALOG[self.instance_type]

    @property
    def nproc_per_node(self) -> int:
        if not self.distributed:
            return 1
        return self.processes_per_node or self.instance.neuron_cores

    @property
    def world_size(self) -> int:
        return self.nodes * self.nproc_per_node

    def with_changes(self, **changes: object) -> JobSpec:
        return replace(self, **changes)  # type: ignore[arg-type]  # field names and types: replace checks them

    def to_dict(self) -> dict[str, object]:
        """Plain data; ``stack`` only when it is not ``xla``, so a spec from before stacks existed (whose hash
        names its running job) keeps its content hash."""
        data = asdict(self)
        data["args"] = list(self.args)
        data["wrapper"] = list(self.wrapper)
        data["command"] = list(self.command)
        if data["stack"] == boundary.STACK_XLA:
            del data["stack"]
        # fields that came later only when set, so an older spec keeps its content hash
        for later, default in (
            ("command", []),
            ("code_uri", None),
            ("secrets", {}),
            ("all_nodes_outputs", False),
            ("capacity_reservation", None),
        ):
            if data[later] == default:
                del data[later]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> JobSpec:
        values: dict[str, Any] = dict(data)  # as JSON gave it: the dataclass checks nothing, the fields below
        values["args"] = tuple(values.get("args") or ())
        values["env"] = dict(values.get("env") or {})
        values["wrapper"] = tuple(values.get("wrapper") or ())
        values["command"] = tuple(values.get("command") or ())
        values["secrets"] = dict(values.get("secrets") or {})
        return cls(**values)

    def content_hash(self, length: int = 12) -> str:
        """Stable hash of what the job will do: equal specs share results and job names."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:length]

    def problems(self) -> list[str]:
        """Every reason this spec must not run; empty when it is valid."""
        found: list[str] = []
        if not _NAME_RE.match(self.name or ""):
            found.append(
                f"name {self.name!r} must be 1-100 letters, digits, '-' or '_', starting with a letter or digit"
            )
        if self.command:
            if self.entry_point:
                found.append("give either entry_point (a module) or command, not both")
            if not all(isinstance(w, str) and w for w in self.command):
                found.append("command must be a list of non-empty strings")
        elif not _MODULE_RE.match(self.entry_point or ""):
            found.append(f"entry_point {self.entry_point!r} must be a dotted Python module name")
        from airflow_provider_trainium.neuron.secrets import secret_problems

        found += secret_problems(self.secrets, set(self.env))
        for name in self.secrets:
            problem = env_name_problem(str(name), user=True)
            if problem:
                found.append(f"secret {problem}")
        if not all(isinstance(a, str) for a in self.args):
            found.append("args must all be strings")
        for key, value in self.env.items():
            problem = env_name_problem(str(key))
            if problem:
                found.append(problem)
            if not isinstance(value, str):
                found.append(f"env {key} must be a string, got {type(value).__name__}")

        instance = CATALOG.get(self.instance_type)
        if instance is None:
            found.append(
                f"instance_type {self.instance_type!r} is not a Trainium instance type; "
                f"allowed: {', '.join(sorted(CATALOG))}"
            )
        if not isinstance(self.nodes, int) or self.nodes < 1:
            found.append(f"nodes must be an integer >= 1, got {self.nodes!r}")
        elif instance is not None and self.nodes > instance.max_nodes:
            if not instance.multi_node:
                found.append(
                    f"nodes={self.nodes} on {instance.name}: this instance type has no EFA and runs on one node "
                    f"only; use one of {', '.join(n for n, i in sorted(CATALOG.items()) if i.multi_node)} "
                    "for multi-node training"
                )
            else:
                found.append(f"nodes must be between 1 and {instance.max_nodes} for {instance.name}")
        if (
            instance is not None
            and self.processes_per_node is not None
            and not (1 <= self.processes_per_node <= instance.neuron_cores)
        ):
            found.append(
                f"processes_per_node must be between 1 and {instance.neuron_cores} "
                f"(NeuronCores of {instance.name}), got {self.processes_per_node!r}"
            )
        if not isinstance(self.tensor_parallel_size, int) or self.tensor_parallel_size < 1:
            found.append(f"tensor_parallel_size must be an integer >= 1, got {self.tensor_parallel_size!r}")
        elif instance is not None and 1 <= self.nproc_per_node <= instance.neuron_cores:
            per_node = self.nproc_per_node
            if per_node % self.tensor_parallel_size:
                allowed = [d for d in range(1, per_node + 1) if per_node % d == 0]
                found.append(
                    f"tensor_parallel_size={self.tensor_parallel_size} does not divide the {per_node} processes "
                    f"per node on {instance.name}; allowed: {', '.join(map(str, allowed))}"
                )
            elif (instance.name, self.tensor_parallel_size) in UNSUPPORTED_TENSOR_PARALLEL:
                found.append(UNSUPPORTED_TENSOR_PARALLEL[(instance.name, self.tensor_parallel_size)])
        if self.stack not in boundary.STACKS:
            found.append(f"stack {self.stack!r} is not one of: {', '.join(boundary.STACKS)}")
        elif instance is not None:
            from airflow_provider_trainium.neuron.releases import stack_problem

            problem = stack_problem(self.stack, self.instance_type)
            if problem:
                found.append(problem)
        if self.workload not in WORKLOADS:
            found.append(f"workload {self.workload!r} is not one of: {', '.join(WORKLOADS)}")
        if not isinstance(self.timeout_seconds, int) or not (60 <= self.timeout_seconds <= MAX_TIMEOUT_SECONDS):
            found.append(f"timeout_seconds must be between 60 and {MAX_TIMEOUT_SECONDS}, got {self.timeout_seconds!r}")
        if self.capacity_reservation is not None and not CAPACITY_RESERVATION_RE.match(str(self.capacity_reservation)):
            found.append(
                f"capacity_reservation {self.capacity_reservation!r} is not a capacity reservation id "
                "('cr-' and 8 to 17 hex digits, e.g. cr-0123456789abcdef0)"
            )
        for name in ("checkpoint_uri", "output_uri", "code_uri"):
            uri = getattr(self, name)
            if uri is not None and uri.split("://", 1)[0] not in URI_SCHEMES:
                found.append(f"{name} {uri!r} must start with one of: {', '.join(s + '://' for s in URI_SCHEMES)}")
        return found

    def validate(self) -> JobSpec:
        found = self.problems()
        if found:
            raise JobSpecError(found)
        return self


def check_layout(
    instance_type: str,
    nodes: int,
    processes_per_node: int | None = None,
    tensor_parallel_size: int = 1,
    entry_point: str = "trainium_trainer.check",
    stack: str | None = None,
) -> None:
    """Validate a DAG run's parallel layout up front, before any job (paid or not) starts. Without ``stack``
    the layout is checked with the stack ``auto`` gives its family (the stack has its own check)."""
    from airflow_provider_trainium.neuron.releases import auto_stack

    JobSpec(
        name="layout-check",
        entry_point=entry_point,
        instance_type=instance_type,
        nodes=nodes,
        processes_per_node=processes_per_node,
        tensor_parallel_size=tensor_parallel_size,
        stack=stack or auto_stack(instance_type),
    ).validate()
