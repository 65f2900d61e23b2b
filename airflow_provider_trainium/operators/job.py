"""``TrainiumJobOperator``: run one trainer module as a job on local compute, ECS or AWS Batch.

The operator validates the spec before anything paid starts, names the job deterministically from the
task instance so a retry attaches to (or skips) the job an earlier try started, and waits in the worker
(local) or in the triggerer (ECS, Batch). It only sequences: prepare, the pre-submit checks, attach or
submit, defer or wait, finish. It never names a backend: it asks the one it resolved what it can do
(``defers``, ``runs_image``, ``check``, its job environment), leaves attach-or-submit to ``compute.attach``,
and what things cost, what a budget allows and which images are trusted to the domain modules
(``neuron.budget``, ``neuron.pricing``, ``compute.cost``, ``compute.budget``, ``neuron.images``).

A DAG file that declares this operator loads none of ``compute/``: the backend table (``backend_table``) gives
the links at parse time, and each ``compute`` module is imported by the method that runs a job with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import ResumableJobMixin
from airflow.sdk import BaseOperator, Context

from airflow_provider_trainium import deprecated_names
from airflow_provider_trainium.backend_table import all_links, backend_links, backends
from airflow_provider_trainium.hooks.trainium import DEFAULT_CONN_ID, TrainiumConfig, TrainiumHook
from airflow_provider_trainium.links.record import job_record, push_record
from airflow_provider_trainium.neuron.spec import JobSpec, JobSpecError
from airflow_provider_trainium.operators.defaults import default_deferrable, wait_options
from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow_provider_trainium.compute.attach import Attached
    from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle, JobStatus

EXIT_BAD_INPUT = boundary.EXIT_BAD_INPUT
DEFAULT_TIMEOUT = timedelta(hours=24)
#: Airflow's defer timeout does not call on_kill; the trigger's own deadline (which stops the job) must
#: come first, so the defer timeout only backs it up.
DEFER_GRACE = timedelta(minutes=5)


def _int(value: Any, field: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise JobSpecError([f"{field} must be an integer, got {value!r}"]) from None


_UNSET: Any = object()


def failure_message(handle: JobHandle, status: JobStatus) -> str:
    """What a task that waited on a job that did not succeed says: state, reason and the log's last lines."""
    message = f"job {handle.job_id} {status.state.value.lower()}: {status.reason}"
    tail = "\n".join(status.log_tail[-30:])
    return message + (f"\nlast lines:\n{tail}" if tail else "")


@dataclass(frozen=True)
class PreparedJob:
    """What one try runs, decided once: the resolved backend name, the validated spec, the job's name and tags.

    It travels through a deferral in the ``execute_complete`` kwargs, so the try never rebuilds it.
    """

    compute: str
    spec: JobSpec
    job_name: str
    tags: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"compute": self.compute, "spec": self.spec.to_dict(), "job_name": self.job_name, "tags": self.tags}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PreparedJob:
        return cls(data["compute"], JobSpec.from_dict(data["spec"]), data["job_name"], dict(data["tags"]))


#: A check of the prepared job before anything is found or submitted; raises ValueError (or
#: AirflowFailException) to fail the task without retries.
PreSubmitCheck = Callable[[Context, PreparedJob, "ComputeBackend"], None]


class TrainiumJobOperator(ResumableJobMixin, BaseOperator):
    """Run ``python -m <entry_point> <args>``, a ``command`` or a ``script`` (under torchrun when ``distributed``)
    on Trainium compute.

    :param entry_point: a Python module in the image (or in ``code_dir``), run with ``python -m``.
    :param command: instead of a module, the command every process runs (``["python", "train.py"]``,
        ``["bash", "run.sh"]``), then ``job_args``. Not templated: what runs is the DAG's, never a run's.
    :param script: shorthand for ``command=["python", script]``; a relative path is looked up in ``code_dir``.
    :param code_dir: a folder on the worker shipped with the job (``code_bundle``): each node gets it as its
        code folder, first on ``PYTHONPATH``. Bigger code belongs in an image (``TrainiumImageBuildOperator``).
    :param secrets: environment name -> reference (a Secrets Manager ARN, an SSM parameter ARN or
        ``ssm:<name>``); only the process sees the value (``neuron.secrets``).
    :param all_nodes_outputs: a user's job keeps node 0's output and checkpoint folders; True keeps every
        node's, under ``node-<i>/`` (``trainium_trainer.job_dirs``).

    :param compute: ``auto`` (local without a ``trainium`` connection; ECS for one node, Batch for more),
        or a backend name from ``compute.backends`` (``local``, ``ecs``, ``batch``).
    :param capacity_reservation: an EC2 Capacity Reservation or Capacity Block id (``cr-...``): the job goes to the
        Batch queue, or ECS cluster and capacity provider, the connection's ``capacity_reservations`` maps it to
        (the stack launched into it). One the map lacks fails the task before anything starts; local compute
        ignores it. None: the default queue or cluster.
    :param stack: the training stack, ``xla`` or ``native``; ``auto`` (default) lets the instance family choose
        (``xla`` on Trn1, ``native`` on Trn2/Trn3). The Neuron release table decides (``neuron.releases``); a
        stack the family cannot train fails the task before anything is submitted, without retries.
    :param output_uri: where the job writes its results; default
        ``<artifact_root>/runs/<dag_id>/<run>/<task_id>``. Returned as the task's XCom value.
    :param local_max_processes_per_node: on local compute each process stands in for a NeuronCore; this
        caps them so a trn1.32xlarge spec does not start 32 processes on a laptop.
    :param max_cost_usd: the run's budget. A job whose worst case (nodes x hourly price x the job's timeout)
        exceeds it is refused before anything starts; a running job whose accrued cost passes it is stopped
        (its checkpoints are kept, so a retry with a higher budget resumes). None: no budget.
    :param allow_over_budget_estimate: start a job whose worst case exceeds ``max_cost_usd`` anyway; the
        mid-run stop still applies.

    :param deferrable: wait for a remote job in the triggerer instead of a worker slot; default: Airflow's
        ``[operators] default_deferrable``. Local compute always waits in the worker (its processes are here).
    :param wait_for_completion: False submits (or attaches to) the job and returns its id at once; a
        ``TrainiumJobSensor`` waits for it later. The budget's mid-run stop applies only while this task waits.
    :param poll_interval: seconds between the remote job's status rounds (default: the backend's, 30 s).
    :param log_interval: seconds between reads of a Batch job's log streams (default: 30 s).
    :param placement_timeout: seconds an ECS task may wait for an instance before it is stopped (default 1800).
    """

    template_fields: Sequence[str] = (
        "entry_point",
        "job_args",
        "env",
        "instance_type",
        "nodes",
        "processes_per_node",
        "stack",
        "compute",
        "capacity_reservation",
        "image",
        "output_uri",
        "checkpoint_uri",
        "compile_cache_uri",
        "max_cost_usd",
        "allow_over_budget_estimate",
    )
    ui_color = "#ff9900"
    #: Every backend's links; each reads the one link record (``links.record``) and shows only for its own jobs.
    operator_extra_links = all_links()
    external_id_key = "trainium_job"

    def __init__(
        self,
        *,
        entry_point: str | None = None,
        job_args: Sequence[str] = (),
        command: Sequence[str] | None = None,
        script: str | None = None,
        code_dir: str | None = None,
        secrets: dict[str, str] | None = None,
        all_nodes_outputs: bool = False,
        env: dict[str, str] | None = None,
        instance_type: str = "trn1.2xlarge",
        nodes: int | str = 1,
        processes_per_node: int | str | None = None,
        tensor_parallel_size: int = 1,
        distributed: bool = True,
        workload: str = "default",
        compute: str = "auto",
        capacity_reservation: str | None = None,
        stack: str = "auto",
        image: str | None = None,
        output_uri: str | None = None,
        checkpoint_uri: str | None = None,
        compile_cache_uri: str | None = None,
        trainium_conn_id: str = DEFAULT_CONN_ID,
        deferrable: bool | None = None,
        wait_for_completion: bool = True,
        poll_interval: float | None = None,
        log_interval: float | None = None,
        placement_timeout: float | None = None,
        local_max_processes_per_node: int = 2,
        max_cost_usd: float | str | None = None,
        allow_over_budget_estimate: bool | str = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if sum(x is not None for x in (entry_point, command, script)) != 1:
            raise ValueError(f"{type(self).__name__} needs exactly one of entry_point, command and script")
        self.entry_point = entry_point or ""
        self.command = [str(word) for word in command or ()] if script is None else ["python", str(script)]
        self.code_dir = code_dir
        self.secrets = dict(secrets or {})
        self.all_nodes_outputs = all_nodes_outputs
        self.job_args = list(job_args)
        self.env = dict(env or {})
        self.instance_type = instance_type
        self.nodes = nodes
        self.processes_per_node = processes_per_node
        self.tensor_parallel_size = tensor_parallel_size
        self.distributed = distributed
        self.workload = workload
        self.compute = compute
        self.capacity_reservation = capacity_reservation
        self.stack = stack
        self.image = image
        self.output_uri = output_uri
        self.checkpoint_uri = checkpoint_uri
        self.compile_cache_uri = compile_cache_uri
        self.trainium_conn_id = trainium_conn_id
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.wait_for_completion = wait_for_completion
        self.poll_interval = poll_interval
        self.log_interval = log_interval
        self.placement_timeout = placement_timeout
        self.local_max_processes_per_node = local_max_processes_per_node
        self.max_cost_usd = max_cost_usd
        self.allow_over_budget_estimate = allow_over_budget_estimate
        self._config: TrainiumConfig | None = None
        self._node_count: int | None = None
        self._prepared: PreparedJob | None = None
        self._backend: ComputeBackend | None = None
        self._handle: JobHandle | None = None
        self._result: Any = _UNSET
        self._cost: dict[str, Any] | None = None
        if str(compute) in backends():
            # a literal backend declares only its own links (none on local: no empty "Extra Links" section)
            self.operator_extra_links = backend_links(str(compute))

    # -- what to run --------------------------------------------------------------------------------
    def job_timeout(self) -> timedelta:
        return self.execution_timeout or DEFAULT_TIMEOUT

    @staticmethod
    def task_instance_prefix(context: Context, config: TrainiumConfig, kind: str) -> str:
        """``<artifact_root>/<kind>/<dag_id>/<run>/<task_id>[/<map_index>]``: one task instance's place."""
        from airflow_provider_trainium.compute import naming

        ti = context["ti"]
        parts = [config.artifact_root.rstrip("/"), kind, ti.dag_id, naming.run_key(ti.run_id), ti.task_id]
        if ti.map_index is not None and ti.map_index >= 0:
            parts.append(str(ti.map_index))
        return "/".join(parts)

    def run_prefix(self, context: Context, config: TrainiumConfig) -> str:
        return self.task_instance_prefix(context, config, "runs")

    def job_arguments(self) -> list[str]:
        """The entry point's arguments (a compile trial adds its own)."""
        return [str(a) for a in self.job_args]

    def cache_uri(self, context: Context, config: TrainiumConfig) -> str | None:
        """The persistent compilation cache the job uses, if any."""
        return self.compile_cache_uri or None

    def extra_env(self, context: Context, config: TrainiumConfig, backend: ComputeBackend) -> dict[str, str]:
        from airflow_provider_trainium.neuron.inputs import allowed_prefixes, prefixes_env

        # the trainer checks its inputs again against these prefixes
        env: dict[str, str] = prefixes_env(allowed_prefixes(config.artifact_root, config.allowed_input_prefixes))
        cache = self.cache_uri(context, config)
        if cache:
            env[boundary.ENV_COMPILE_CACHE_URI] = cache
        env.update(backend.job_environment(cache))
        return env

    def wrapper(self, backend: ComputeBackend) -> tuple[str, ...]:
        return ()

    def user_env_problems(self) -> list[str]:
        """The task's own ``env`` by the rule for a task's names (no ``AWS_*``: credentials come by role or secret)."""
        from airflow_provider_trainium.neuron.spec import env_name_problem

        return [p for p in (env_name_problem(str(name), user=True) for name in self.env) if p]

    def code_uri(self, context: Context, config: TrainiumConfig) -> str | None:
        """The job's code bundle: ``code_dir`` uploaded by content hash (nothing to ship: None)."""
        if not self.code_dir:
            return None
        from airflow_provider_trainium.code_bundle import upload_bundle

        return upload_bundle(self.code_dir, config.artifact_root, config.aws_conn_id)

    def default_checkpoint_uri(self, context: Context, config: TrainiumConfig) -> str:
        """A user's job keeps checkpoints per task instance, so every retry and rerun of it resumes them."""
        return self.task_instance_prefix(context, config, "checkpoints")

    def build_spec(self, context: Context, config: TrainiumConfig, backend: ComputeBackend) -> JobSpec:
        from airflow_provider_trainium.compute import naming
        from airflow_provider_trainium.neuron.releases import resolve_stack

        problems = self.user_env_problems()
        if problems:
            raise JobSpecError(problems)

        # the release table's rule, before all else; an image-running backend's image carries its own stack
        image = (self.image or config.image) if backend.runs_image else None
        stack = resolve_stack(str(self.stack), str(self.instance_type), image, self.image_labels(context, image))
        prefix = self.run_prefix(context, config)
        ti = context["ti"]
        spec = JobSpec(
            name=naming.safe_part(f"{ti.dag_id}-{ti.task_id}", 100),
            entry_point=self.entry_point,
            args=tuple(self.job_arguments()),
            env={**self.extra_env(context, config, backend), **{k: str(v) for k, v in self.env.items()}},
            instance_type=str(self.instance_type),
            nodes=self._nodes(),
            processes_per_node=None
            if self.processes_per_node in (None, "", "None")
            else _int(self.processes_per_node, "processes_per_node"),
            tensor_parallel_size=_int(self.tensor_parallel_size, "tensor_parallel_size"),
            distributed=self.distributed,
            workload=self.workload,  # type: ignore[arg-type]
            image=self.image or config.image,
            timeout_seconds=int(self.job_timeout().total_seconds()),
            checkpoint_uri=self.checkpoint_uri,
            output_uri=self.output_uri or prefix,
            wrapper=self.wrapper(backend),
            stack=stack,
            command=tuple(self.command),
            secrets=dict(self.secrets),
            all_nodes_outputs=bool(self.all_nodes_outputs),
            capacity_reservation=str(self.capacity_reservation or "").strip() or None,
        )
        if spec.runs_user_code:
            spec = spec.with_changes(
                checkpoint_uri=spec.checkpoint_uri or self.default_checkpoint_uri(context, config),
                code_uri=self.code_uri(context, config),
            )
        from airflow_provider_trainium.compute.cost import with_cost_environment
        from airflow_provider_trainium.neuron.pricing import prices_for

        return with_cost_environment(spec, backend.name, prices_for(config)).validate()

    def _nodes(self) -> int:
        """``nodes`` (templated: it may arrive as a string) as an int, converted once per try."""
        if self._node_count is None:
            self._node_count = _int(self.nodes, "nodes")
        return self._node_count

    # -- preparing a try ------------------------------------------------------------------------------
    def config(self) -> TrainiumConfig:
        if self._config is None:
            self._config = TrainiumHook(self.trainium_conn_id).get_config()
        return self._config

    def backend_for(self, compute: str) -> ComputeBackend:
        """The backend this try runs on (built once; the operator's settings go in as options)."""
        if self._backend is None or self._backend.name != compute:
            from airflow_provider_trainium.compute.backends import build_backend

            self._backend = build_backend(compute, self.config(), self.backend_options())
        return self._backend

    def backend_options(self) -> dict[str, Any]:
        """The operator's settings a backend may take (each backend reads the ones it knows)."""
        wait = wait_options(self.poll_interval, self.log_interval, self.placement_timeout)
        return {"local_max_processes_per_node": self.local_max_processes_per_node, **wait}

    def check_trusted_image(self, context: Context, prepared: PreparedJob, backend: ComputeBackend) -> None:
        """An image-running backend only gets an image from the trusted repository or built by this DAG."""
        if backend.runs_image:
            from airflow_provider_trainium.image.run_images import built_references
            from airflow_provider_trainium.neuron.images import check_trusted

            built = built_references(context, self.dag if self.has_dag() else None)
            check_trusted(prepared.spec.image, self.config(), built)

    def image_labels(self, context: Context, image: str | None) -> dict[str, str] | None:
        """The labels of ``image`` when a build task of this run built it (they name its Neuron release and so its
        stack), else None."""
        if not image:
            return None
        from airflow_provider_trainium.image.run_images import built_image_labels

        return built_image_labels(context, self.dag if self.has_dag() else None, image)

    def check_neuron_driver(self, context: Context, prepared: PreparedJob, backend: ComputeBackend) -> None:
        """The hosts' Neuron driver must accept the image's Neuron runtime, or ``nrt_init()`` fails on the paid
        instances at the job's first device use. The driver is that of the job's instance type (the XLA and native
        images need different ones); a connection that does not know it gets a warning."""
        if backend.runs_image:
            from airflow_provider_trainium.neuron.releases import driver_check, image_stack_problem

            labels = self.image_labels(context, prepared.spec.image)
            problem = image_stack_problem(prepared.spec.stack, prepared.spec.image, labels)
            if problem:
                raise ValueError(problem)
            driver = self.config().neuron_driver_for(prepared.spec.instance_type)
            warning = driver_check(prepared.spec.image, driver, labels)
            if warning:
                self.log.warning("%s", warning)

    def check_on_backend(self, context: Context, prepared: PreparedJob, backend: ComputeBackend) -> None:
        """The backend's own checks (storage, queue, layout), before any API call."""
        backend.check(prepared.spec)

    def check_budget(self, context: Context, prepared: PreparedJob, backend: ComputeBackend) -> None:
        """The worst case (every node billed until the job's own timeout stops it) must fit ``max_cost_usd``."""
        from airflow_provider_trainium.neuron.budget import capped_budget, check_job_budget, dag_budget_ceiling
        from airflow_provider_trainium.neuron.pricing import prices_for

        prices = prices_for(self.config())
        # the DAG author's ceiling caps the run's budget here and in the watch (which reads max_cost_usd)
        self.max_cost_usd = capped_budget(self.max_cost_usd, dag_budget_ceiling(context.get("dag")))
        check = check_job_budget(prepared.spec, self.max_cost_usd, self.allow_over_budget_estimate, prices)
        summary = check.summary()
        if summary:
            self.log.info("%s", summary)

    def pre_submit_checks(self) -> list[PreSubmitCheck]:
        """Every check of the prepared job that runs before find-or-submit; a subclass appends its own."""
        return [self.check_budget, self.check_trusted_image, self.check_neuron_driver, self.check_on_backend]

    def prepare(self, context: Context) -> PreparedJob:
        """Backend, validated spec, job name and tags, once per try; bad input fails here, before anything starts."""
        if self._prepared is not None:
            return self._prepared
        from airflow.providers.common.compat.sdk import AirflowFailException

        from airflow_provider_trainium.compute import naming
        from airflow_provider_trainium.compute.backends import resolve_compute

        ti = context["ti"]
        map_index = ti.map_index if ti.map_index is not None else -1
        try:
            compute = resolve_compute(str(self.compute), self.config(), self._nodes())
            backend = self.backend_for(compute)
            prepared = PreparedJob(
                compute,
                self.build_spec(context, self.config(), backend),
                naming.job_name(ti.dag_id, ti.task_id, ti.run_id, map_index),
                naming.job_tags(ti.dag_id, ti.task_id, ti.run_id, map_index),
            )
            for check in self.pre_submit_checks():
                check(context, prepared, backend)
        except ValueError as err:  # JobSpecError included: bad input is never retried
            raise AirflowFailException(str(err)) from err
        spec = prepared.spec
        self.log.info(
            "job %s on %s: %s x %d node(s), %d process(es) per node -> %s",
            prepared.job_name, compute, spec.instance_type, spec.nodes, spec.nproc_per_node, spec.output_uri,
        )  # fmt: skip
        self._prepared = prepared
        return prepared

    # -- running it ---------------------------------------------------------------------------------
    def attach(self, context: Context, prepared: PreparedJob) -> Attached:
        """The job an earlier try (or a restarted worker) started, else a new one. Never a second copy."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from airflow_provider_trainium.compute.attach import find_or_submit
        from airflow_provider_trainium.compute.base import JobInputError

        backend = self.backend_for(prepared.compute)
        try:
            attached = find_or_submit(backend, prepared.spec, prepared.job_name, prepared.tags, self.log.info)
        except JobInputError as err:  # what only the platform could tell (a Spot queue, no such queue)
            raise AirflowFailException(str(err)) from err
        self.remember(context, attached.handle)
        return attached

    def remember(self, context: Context, handle: JobHandle, log_streams: dict[str, str] | None = None) -> None:
        self._handle = handle
        ti = context["ti"]
        ti.xcom_push(key="job", value=handle.to_dict())
        push_record(context, job_record(handle, log_streams))

    def pre_execute(self, context: Any) -> None:
        """Push the link record before anything can fail, so the links Airflow computes never miss it.

        Also forgets what an earlier try prepared (an operator object may serve several tries).
        """
        self._config, self._node_count, self._prepared, self._result = None, None, None, _UNSET
        self._handle, self._cost = None, None
        push_record(context)
        super().pre_execute(context)

    def execute(self, context: Context) -> Any:
        from airflow_provider_trainium.compute.budget import watch_budget

        prepared = self.prepare(context)
        backend = self.backend_for(prepared.compute)
        if not self.wait_for_completion:
            return self.submit_only(context, prepared, backend)
        if not (self.deferrable and backend.defers):
            # ResumableJobMixin: the job id survives a worker crash in task_state_store; attach() also finds
            # it by name and tags when the store is empty.
            return self.execute_resumable(context)
        attached = self.attach(context, prepared)
        handle = attached.handle
        if attached.already_succeeded:
            return self.on_success(context, prepared.spec, handle)
        store = context.get("task_state_store")
        if store is not None:
            store.set(self.external_id_key, handle.to_dict())
        deadline = time.time() + self.job_timeout().total_seconds()
        budget = watch_budget(self.max_cost_usd, prepared.spec)
        trigger = backend.trigger(handle, deadline, budget, self.log_cursor(prepared, handle))
        # the trigger fires at its own deadline first; Airflow's timeout is only the backstop
        self.defer(
            trigger=trigger,
            method_name="execute_complete",
            kwargs={"prepared": prepared.to_dict()},
            timeout=self.job_timeout() + DEFER_GRACE,
        )

    def submit_only(self, context: Context, prepared: PreparedJob, backend: ComputeBackend) -> str:
        """``wait_for_completion=False``: the job an earlier try started, else a new one; its id is the result
        (the handle is the ``job`` XCom, where ``TrainiumJobSensor`` checks it against the task's own job)."""
        if not backend.defers:
            from airflow.providers.common.compat.sdk import AirflowFailException

            raise AirflowFailException(
                f"wait_for_completion=False needs a remote backend; {prepared.compute} compute runs the job in this "
                "task's own processes"
            )
        attached = self.attach(context, prepared)
        self.log.info("job %s submitted; a TrainiumJobSensor waits for it", attached.handle.job_id)
        return attached.handle.job_id

    @staticmethod
    def log_cursor(prepared: PreparedJob, handle: JobHandle) -> str | None:
        """Where the wait keeps how far it read the job's log, so a restarted triggerer or worker resumes it."""
        from airflow_provider_trainium.compute.cloudwatch import cursor_uri

        return cursor_uri(prepared.spec.output_uri, handle.job_id)

    # -- ResumableJobMixin (the worker-side wait) ---------------------------------------------------------
    def submit_job(self, context: Context) -> Any:
        return self.attach(context, self.prepare(context)).handle.to_dict()

    def get_job_status(self, external_id: Any, context: Context) -> str:
        from airflow_provider_trainium.compute.base import JobHandle

        backend = self.backend_for(self.prepare(context).compute)
        return backend.status(JobHandle.from_dict(external_id)).state.value

    def is_job_active(self, status: str) -> bool:
        from airflow_provider_trainium.compute.base import JobState

        return not JobState(status).terminal

    def is_job_succeeded(self, status: str) -> bool:
        from airflow_provider_trainium.compute.base import JobState

        return JobState(status) is JobState.SUCCEEDED

    def poll_until_complete(self, external_id: Any, context: Context) -> Any:
        from airflow_provider_trainium.compute.base import JobHandle
        from airflow_provider_trainium.compute.budget import watch_budget

        prepared = self.prepare(context)
        backend = self.backend_for(prepared.compute)
        handle = JobHandle.from_dict(external_id)
        self.remember(context, handle)
        status = backend.status(handle)
        if not status.state.terminal:
            from airflow_provider_trainium.compute.watch import wait_for

            budget = watch_budget(self.max_cost_usd, prepared.spec)
            timeout = self.job_timeout().total_seconds()
            status = wait_for(backend, handle, self.log.info, timeout, budget, self.log_cursor(prepared, handle))
        self._result = self.finish(context, prepared.spec, handle, status)
        return self._result

    def get_job_result(self, external_id: Any, context: Context) -> Any:
        if self._result is not _UNSET:
            return self._result
        from airflow_provider_trainium.compute.base import JobHandle

        prepared = self.prepare(context)
        handle = JobHandle.from_dict(external_id)
        self.remember(context, handle)
        return self.on_success(context, prepared.spec, handle)

    def execute_complete(self, context: Context, event: dict[str, Any], prepared: dict[str, Any] | None = None) -> Any:
        """After the trigger: the job spec prepared before deferring, not a rebuilt one."""
        from airflow_provider_trainium.compute.base import JobHandle

        if prepared is not None:
            self._prepared = PreparedJob.from_dict(prepared)
        job = self.prepare(context)  # only a deferral from before prepared jobs were carried rebuilds it
        handle = JobHandle.from_dict(event["handle"])
        self.remember(context, handle, event.get("log_streams"))  # pre_execute reset the link record
        from airflow_provider_trainium.compute.watch import drain_logs

        # the log's tail, which the trigger leaves to the worker: a finishing trigger's last lines can miss the task log
        status = drain_logs(self.backend_for(job.compute), event, self.log.info, self.log_cursor(job, handle))
        return self.finish(context, job.spec, handle, status)

    def record_cost(
        self, context: Context, spec: JobSpec, handle: JobHandle, status: JobStatus | None = None
    ) -> dict[str, Any] | None:
        """Push what the job cost (``trainium_cost``, see ``compute.cost.job_cost``): from what the wait saw the
        platform bill, else from the platform's records. A cost that cannot be read never fails the task."""
        from airflow_provider_trainium.compute.cost import cost_line, job_cost
        from airflow_provider_trainium.neuron.pricing import prices_for

        try:
            backend = self.backend_for(self.prepare(context).compute)
            billed = status.billed_intervals if status is not None else None
            record = job_cost(backend, handle, spec, prices=prices_for(self.config()), billed=billed)
        except Exception as err:  # noqa: BLE001 - the bill is information; the job's result stands
            self.log.warning("the cost of job %s could not be read: %s", handle.job_id, err)
            return None
        context["ti"].xcom_push(key="trainium_cost", value=record)
        self.log.info("%s", cost_line(record))
        self._cost = record
        return record

    def finish(self, context: Context, spec: JobSpec, handle: JobHandle, status: JobStatus) -> Any:
        from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

        from airflow_provider_trainium.compute.base import JobState
        from airflow_provider_trainium.compute.budget import STOP_REASON as BUDGET_STOP_REASON

        self.record_cost(context, spec, handle, status)
        if status.state is JobState.SUCCEEDED:
            return self.on_success(context, spec, handle)
        message = failure_message(handle, status)
        if status.exit_code == EXIT_BAD_INPUT:
            raise AirflowFailException(message + "\n(bad input: not retried)")
        if status.reason.startswith(BUDGET_STOP_REASON):
            # a retry would spend the same budget again: rerun it by hand with a higher max_cost_usd
            raise AirflowFailException(message + "\n(over budget: not retried; a rerun resumes from checkpoints)")
        raise AirflowException(message)

    def on_success(self, context: Context, spec: JobSpec, handle: JobHandle) -> Any:
        """The task's return value: the job's output URI."""
        return spec.output_uri

    def on_kill(self) -> None:
        if self._backend is not None and self._handle is not None:
            self.log.info("task killed: cancelling job %s", self._handle.job_id)
            self._backend.cancel(self._handle, "Airflow task was killed")

    # -- lineage (OpenLineage; the [openlineage] extra) -------------------------------------------------
    def lineage_locations(self, spec: JobSpec) -> tuple[list[str], list[str]]:
        """What the job read (the data and models its arguments name, the compile cache it starts from) and what
        it wrote (its output folder and checkpoints, which the registry's lineage names as its inputs)."""
        from airflow_provider_trainium.operators.lineage import flag_values

        cache = spec.env.get(boundary.ENV_COMPILE_CACHE_URI)
        return [*flag_values(spec.args), *([cache] if cache else [])], [str(spec.output_uri), spec.checkpoint_uri or ""]

    def lineage_compile_cache(self, spec: JobSpec) -> dict[str, Any] | None:
        """The compile cache's part of the run facet (the compile operator adds the key it recorded)."""
        cache = spec.env.get(boundary.ENV_COMPILE_CACHE_URI)
        return {"uri": cache} if cache else None

    def describe_lineage(self) -> Any:
        """This try's job as a ``lineage.JobLineage``, from what ``prepare`` and the wait kept (None: nothing was
        prepared, e.g. bad input failed the task first)."""
        prepared = self._prepared
        if prepared is None:
            return None
        from airflow_provider_trainium.operators.lineage import (
            JobLineage,
            cost_details,
            image_details,
            unique_locations,
        )

        spec = prepared.spec
        backend = self.backend_for(prepared.compute)
        inputs, outputs = self.lineage_locations(spec)
        layout = {
            "instanceType": spec.instance_type,
            "nodes": spec.nodes,
            "processesPerNode": spec.nproc_per_node,
            "neuronCoresPerNode": spec.instance.neuron_cores,
            "worldSize": spec.world_size,
            "tensorParallelSize": spec.tensor_parallel_size,
            "stack": spec.stack,
            "workload": spec.workload,
            "distributed": spec.distributed,
        }
        return JobLineage(
            inputs=unique_locations(inputs),
            outputs=unique_locations(outputs),
            compute=prepared.compute,
            job_name=prepared.job_name,
            job_id=self._handle.job_id if self._handle is not None else None,
            image=image_details(spec.image, backend.runs_image),
            layout=layout,
            cost=cost_details(self._cost, self.max_cost_usd),
            compile_cache=self.lineage_compile_cache(spec),
        )

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Inputs: the data and models the job read; outputs: what it wrote; run facet ``trainiumJob``: its image,
        layout and cost. None without the OpenLineage provider; a failure to build them is only a warning."""
        from airflow_provider_trainium.operators.lineage import operator_lineage

        return operator_lineage(self.describe_lineage, self.log)


def __getattr__(name: str) -> Any:
    """The former class names (:mod:`airflow_provider_trainium.deprecated_names`)."""
    return deprecated_names.resolve(__name__, name)
