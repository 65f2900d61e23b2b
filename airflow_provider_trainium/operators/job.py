"""``NeuronJobOperator``: run one trainer module as a job on local compute, ECS or AWS Batch.

The operator validates the spec before anything paid starts, names the job deterministically from the
task instance so a retry attaches to (or skips) the job an earlier try started, and waits in the worker
(local) or in the triggerer (ECS, Batch).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.providers.common.compat.sdk import ResumableJobMixin
from airflow.sdk import BaseOperator, Context

from airflow_provider_trainium.compute import naming
from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle, JobState, JobStatus
from airflow_provider_trainium.hooks.trainium import DEFAULT_CONN_ID, TrainiumConfig, TrainiumHook
from airflow_provider_trainium.links.batch import batch_links
from airflow_provider_trainium.links.ecs import EcsTaskLink, EcsTaskLogLink
from airflow_provider_trainium.links.record import job_record, push_record
from airflow_provider_trainium.neuron.images import check_image, trusted_repository
from airflow_provider_trainium.neuron.spec import JobSpec, JobSpecError

EXIT_BAD_INPUT = 65
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


class NeuronJobOperator(ResumableJobMixin, BaseOperator):
    """Run ``python -m <entry_point> <args>`` (under torchrun when ``distributed``) on Trainium compute.

    :param compute: ``auto`` (local without a ``trainium`` connection; ECS for one node, Batch for more),
        ``local``, ``ecs`` or ``batch``.
    :param output_uri: where the job writes its results; default
        ``<artifact_root>/runs/<dag_id>/<run>/<task_id>``. Returned as the task's XCom value.
    :param local_max_processes_per_node: on local compute each process stands in for a NeuronCore; this
        caps them so a trn1.32xlarge spec does not start 32 processes on a laptop.
    """

    template_fields: Sequence[str] = (
        "entry_point",
        "job_args",
        "env",
        "instance_type",
        "nodes",
        "processes_per_node",
        "compute",
        "image",
        "output_uri",
        "checkpoint_uri",
        "compile_cache_uri",
    )
    ui_color = "#ff9900"
    #: Each link reads the one link record (``links.record``) and shows only for jobs of its own backend.
    operator_extra_links = (EcsTaskLink(), EcsTaskLogLink(), *batch_links())
    external_id_key = "trainium_job"

    def __init__(
        self,
        *,
        entry_point: str,
        job_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        instance_type: str = "trn1.2xlarge",
        nodes: int | str = 1,
        processes_per_node: int | str | None = None,
        tensor_parallel_size: int = 1,
        distributed: bool = True,
        workload: str = "default",
        compute: str = "auto",
        image: str | None = None,
        output_uri: str | None = None,
        checkpoint_uri: str | None = None,
        compile_cache_uri: str | None = None,
        trainium_conn_id: str = DEFAULT_CONN_ID,
        deferrable: bool = True,
        local_max_processes_per_node: int = 2,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.entry_point = entry_point
        self.job_args = list(job_args)
        self.env = dict(env or {})
        self.instance_type = instance_type
        self.nodes = nodes
        self.processes_per_node = processes_per_node
        self.tensor_parallel_size = tensor_parallel_size
        self.distributed = distributed
        self.workload = workload
        self.compute = compute
        self.image = image
        self.output_uri = output_uri
        self.checkpoint_uri = checkpoint_uri
        self.compile_cache_uri = compile_cache_uri
        self.trainium_conn_id = trainium_conn_id
        self.deferrable = deferrable
        self.local_max_processes_per_node = local_max_processes_per_node
        self._backend: ComputeBackend | None = None
        self._spec: JobSpec | None = None
        self._handle: JobHandle | None = None
        self._result: Any = _UNSET
        if str(compute) == "local":
            self.operator_extra_links = ()  # no console to link to: no empty "Extra Links" section either

    # -- what to run --------------------------------------------------------------------------------
    def job_timeout(self) -> timedelta:
        return self.execution_timeout or DEFAULT_TIMEOUT

    def run_prefix(self, context: Context, config: TrainiumConfig) -> str:
        ti = context["ti"]
        parts = [config.artifact_root.rstrip("/"), "runs", ti.dag_id, naming.run_key(ti.run_id), ti.task_id]
        if ti.map_index is not None and ti.map_index >= 0:
            parts.append(str(ti.map_index))
        return "/".join(parts)

    def extra_env(self, context: Context, config: TrainiumConfig, compute: str) -> dict[str, str]:
        from airflow_provider_trainium.neuron.inputs import allowed_prefixes, prefixes_env

        # the trainer checks its inputs again against these prefixes
        env: dict[str, str] = prefixes_env(allowed_prefixes(config.artifact_root, config.allowed_input_prefixes))
        if self.compile_cache_uri:
            env["TRAINIUM_COMPILE_CACHE_URI"] = self.compile_cache_uri
            if compute != "local":
                env["NEURON_COMPILE_CACHE_URL"] = self.compile_cache_uri
        if compute == "local" and config.artifact_root.startswith("s3://"):
            from airflow_provider_trainium.hooks.aws_env import aws_process_environment

            env.update(aws_process_environment(config.aws_conn_id))
        return env

    def wrapper(self, compute: str) -> tuple[str, ...]:
        return ()

    def build_spec(self, context: Context, config: TrainiumConfig, compute: str) -> JobSpec:
        prefix = self.run_prefix(context, config)
        ti = context["ti"]
        spec = JobSpec(
            name=naming.safe_part(f"{ti.dag_id}-{ti.task_id}", 100),
            entry_point=self.entry_point,
            args=tuple(str(a) for a in self.job_args),
            env={**self.extra_env(context, config, compute), **{k: str(v) for k, v in self.env.items()}},
            instance_type=str(self.instance_type),
            nodes=_int(self.nodes, "nodes"),
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
            wrapper=self.wrapper(compute),
        )
        return spec.validate()

    def built_images(self, context: Context) -> list[str]:
        """The images ``NeuronImageBuildOperator`` tasks of this DAG returned in this run: trusted as built."""
        from airflow_provider_trainium.operators.image import NeuronImageBuildOperator

        tasks = self.dag.tasks if self.has_dag() else []
        task_ids = [t.task_id for t in tasks if isinstance(t, NeuronImageBuildOperator)]
        if not task_ids:
            return []
        pulled = context["ti"].xcom_pull(task_ids=task_ids)
        values = pulled if isinstance(pulled, list) else [pulled]
        return [str(v) for v in values if isinstance(v, str) and v]

    # -- running it ---------------------------------------------------------------------------------
    def prepare(self, context: Context) -> tuple[ComputeBackend, JobSpec, str, dict[str, str]]:
        """Backend, validated spec, job name and tags; bad input fails here, before anything starts."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from airflow_provider_trainium.compute.factory import get_backend, resolve_compute

        try:
            config = TrainiumHook(self.trainium_conn_id).get_config()
            compute = resolve_compute(str(self.compute), config, _int(self.nodes, "nodes"))
            spec = self.build_spec(context, config, compute)
            options: dict[str, Any] = {}
            if compute == "local":
                options["max_processes_per_node"] = self.local_max_processes_per_node
            backend = get_backend(compute, config, **options)
            if compute != "local":
                check_image(spec.image, trusted_repository(config), self.built_images(context))
            check = getattr(backend, "check", None)
            if check is not None:
                check(spec)  # backend-specific checks (image, queue, layout) before any API call
        except ValueError as err:  # JobSpecError included: bad input is never retried
            raise AirflowFailException(str(err)) from err
        self._backend, self._spec = backend, spec

        ti = context["ti"]
        map_index = ti.map_index if ti.map_index is not None else -1
        job_name = naming.job_name(ti.dag_id, ti.task_id, ti.run_id, map_index)
        tags = naming.job_tags(ti.dag_id, ti.task_id, ti.run_id, map_index)
        self.log.info(
            "job %s on %s: %s x %d node(s), %d process(es) per node -> %s",
            job_name, compute, spec.instance_type, spec.nodes, spec.nproc_per_node, spec.output_uri,
        )  # fmt: skip
        return backend, spec, job_name, tags

    def find_or_submit(
        self, context: Context, backend: ComputeBackend, spec: JobSpec, job_name: str, tags: dict[str, str]
    ) -> tuple[JobHandle, JobStatus | None]:
        """The job an earlier try (or a restarted worker) started, else a new one. Never a second copy."""
        handle = backend.find_existing(job_name, tags)
        status: JobStatus | None = None
        earlier_hash = handle.details.get("spec_hash") if handle is not None else None
        if handle is not None and earlier_hash not in (None, spec.content_hash()):
            # Same task instance, different job (a run id reused after a reset, changed params): run it.
            self.log.info("job %s ran a different spec; starting this one", handle.job_id)
            handle = None
        if handle is not None:
            status = backend.status(handle)
            if status.state is JobState.SUCCEEDED:
                self.log.info("job %s already succeeded in an earlier try; not running it again", handle.job_id)
            elif status.state.terminal:
                handle, status = None, None
            else:
                self.log.info("attaching to job %s started by an earlier try (%s)", handle.job_id, status.state)
        if handle is None:
            handle = backend.submit(spec, job_name, tags)
            self.log.info("submitted job %s", handle.job_id)
        self.remember(context, handle)
        return handle, status

    def remember(self, context: Context, handle: JobHandle, log_streams: dict[str, str] | None = None) -> None:
        self._handle = handle
        ti = context["ti"]
        ti.xcom_push(key="job", value=handle.to_dict())
        push_record(context, job_record(handle, log_streams))

    def pre_execute(self, context: Any) -> None:
        """Push the link record before anything can fail, so the links Airflow computes never miss it."""
        push_record(context)
        super().pre_execute(context)

    @staticmethod
    def defers(backend: ComputeBackend) -> bool:
        """Remote backends wait in the triggerer; local compute waits in the worker."""
        return type(backend).trigger is not ComputeBackend.trigger

    def execute(self, context: Context) -> Any:
        backend, spec, job_name, tags = self.prepare(context)
        if not (self.deferrable and self.defers(backend)):
            # ResumableJobMixin: the job id survives a worker crash in task_state_store; find_or_submit
            # also finds it by name and tags when the store is empty.
            return self.execute_resumable(context)
        handle, status = self.find_or_submit(context, backend, spec, job_name, tags)
        if status is not None and status.state is JobState.SUCCEEDED:
            return self.on_success(context, spec, handle)
        store = context.get("task_state_store")
        if store is not None:
            store.set(self.external_id_key, handle.to_dict())
        trigger = backend.trigger(handle, time.time() + self.job_timeout().total_seconds())
        if hasattr(trigger, "log_cursor_uri") and spec.output_uri:
            from airflow_provider_trainium.triggers.log_cursor import cursor_uri

            # a restarted triggerer resumes each log stream where this trigger stopped
            trigger.log_cursor_uri = cursor_uri(spec.output_uri, handle.job_id)
        # the trigger fires at its own deadline first; Airflow's timeout is only the backstop
        self.defer(trigger=trigger, method_name="execute_complete", timeout=self.job_timeout() + DEFER_GRACE)

    # -- ResumableJobMixin (the worker-side wait) ---------------------------------------------------------
    def _ready(self, context: Context) -> tuple[ComputeBackend, JobSpec]:
        if self._backend is None or self._spec is None:
            self.prepare(context)
        assert self._backend is not None and self._spec is not None
        return self._backend, self._spec

    def submit_job(self, context: Context) -> Any:
        backend, spec = self._ready(context)
        ti = context["ti"]
        map_index = ti.map_index if ti.map_index is not None else -1
        job_name = naming.job_name(ti.dag_id, ti.task_id, ti.run_id, map_index)
        tags = naming.job_tags(ti.dag_id, ti.task_id, ti.run_id, map_index)
        handle, _ = self.find_or_submit(context, backend, spec, job_name, tags)
        return handle.to_dict()

    def get_job_status(self, external_id: Any, context: Context) -> str:
        backend, _ = self._ready(context)
        return backend.status(JobHandle.from_dict(external_id)).state.value

    def is_job_active(self, status: str) -> bool:
        return not JobState(status).terminal

    def is_job_succeeded(self, status: str) -> bool:
        return JobState(status) is JobState.SUCCEEDED

    def poll_until_complete(self, external_id: Any, context: Context) -> Any:
        backend, spec = self._ready(context)
        handle = JobHandle.from_dict(external_id)
        self.remember(context, handle)
        status = backend.status(handle)
        if not status.state.terminal:
            status = backend.wait(handle, self.log.info, self.job_timeout().total_seconds())
        self._result = self.finish(context, spec, handle, status)
        return self._result

    def get_job_result(self, external_id: Any, context: Context) -> Any:
        if self._result is not _UNSET:
            return self._result
        _, spec = self._ready(context)
        handle = JobHandle.from_dict(external_id)
        self.remember(context, handle)
        return self.on_success(context, spec, handle)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        handle = JobHandle.from_dict(event["handle"])
        self.remember(context, handle, event.get("log_streams"))  # pre_execute reset the link record
        status = JobStatus.from_event(event)
        from airflow_provider_trainium.compute.factory import resolve_compute

        config = TrainiumHook(self.trainium_conn_id).get_config()
        compute = resolve_compute(str(self.compute), config, _int(self.nodes, "nodes"))
        return self.finish(context, self.build_spec(context, config, compute), handle, status)

    def finish(self, context: Context, spec: JobSpec, handle: JobHandle, status: JobStatus) -> Any:
        from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

        if status.state is JobState.SUCCEEDED:
            return self.on_success(context, spec, handle)
        tail = "\n".join(status.log_tail[-30:])
        message = f"job {handle.job_id} {status.state.value.lower()}: {status.reason}"
        if tail:
            message += f"\nlast lines:\n{tail}"
        if status.exit_code == EXIT_BAD_INPUT:
            raise AirflowFailException(message + "\n(bad input: not retried)")
        raise AirflowException(message)

    def on_success(self, context: Context, spec: JobSpec, handle: JobHandle) -> Any:
        """The task's return value: the job's output URI."""
        return spec.output_uri

    def on_kill(self) -> None:
        if self._backend is not None and self._handle is not None:
            self.log.info("task killed: cancelling job %s", self._handle.job_id)
            self._backend.cancel(self._handle, "Airflow task was killed")
