"""``TrainiumJobOperator``: run one trainer module as a job on local compute, ECS or AWS Batch.

The operator validates the spec before anything paid starts, names the job deterministically from the task
instance so a retry attaches to (or skips) the job an earlier try started, and waits in the worker (local) or in
the triggerer (ECS, Batch). This module only sequences one try: prepare (``job_spec``), the pre-submit checks
(``job_checks``), attach or submit (``compute.attach``), defer or wait (``job_wait``), finish (``job_cost``,
``job_finish``); ``job_lineage`` holds its OpenLineage hooks. It never names a backend: it asks the one it resolved
what it can do (``defers``, ``runs_image``, ``check``, its job environment).

A DAG file that declares this operator loads none of ``compute/``: the backend table gives the links at parse
time, and each ``compute`` module and run-time helper is imported by the method that runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import ResumableJobMixin
from airflow.sdk import BaseOperator, Context

from airflow_provider_trainium import deprecated_names
from airflow_provider_trainium.backend_table import all_links, backend_links, backends
from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID
from airflow_provider_trainium.links.record import job_record, push_record
from airflow_provider_trainium.operators.defaults import default_deferrable
from airflow_provider_trainium.operators.job_lineage import JobLineageMixin
from airflow_provider_trainium.operators.job_spec import JobSpecMixin
from airflow_provider_trainium.operators.job_wait import DEFER_GRACE, NO_RESULT, JobWaitMixin, claim_job, job_trigger

if TYPE_CHECKING:
    from airflow_provider_trainium.compute.attach import Attached
    from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle, JobStatus
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig
    from airflow_provider_trainium.neuron.spec import JobSpec
    from airflow_provider_trainium.operators.job_checks import PreSubmitCheck
    from airflow_provider_trainium.operators.prepared_job import PreparedJob


class TrainiumJobOperator(JobSpecMixin, JobWaitMixin, JobLineageMixin, ResumableJobMixin, BaseOperator):
    """Run ``python -m <entry_point> <args>``, a ``command`` or a ``script`` (under torchrun when ``distributed``)
    on Trainium compute.

    :param entry_point: a Python module in the image (or in ``code_dir``), run with ``python -m``. Not templated.
    :param command: instead of a module, the command every process runs (``["python", "train.py"]``,
        ``["bash", "run.sh"]``), then ``job_args``. Not templated: what runs is the DAG's, never a run's.
    :param script: shorthand for ``command=["python", script]``; a relative path is looked up in ``code_dir``.
    :param code_dir: a folder on the worker shipped with the job (``code_bundle``): each node gets it as its
        code folder, first on ``PYTHONPATH``. Bigger code belongs in an image (``TrainiumImageBuildOperator``).
    :param secrets: environment name -> reference (a Secrets Manager ARN, an SSM parameter ARN or
        ``ssm:<name>``); only the process sees the value (``neuron.secrets``).
    :param all_nodes_outputs: a user's job keeps node 0's output and checkpoint folders; True keeps every
        node's, under ``node-<i>/`` (``trainium_trainer.job_dirs``).
    :param metric_patterns: curves for a user's job (not a ``trainium_trainer`` module) that does not call
        ``trainium_trainer.track``: stream field (``step``, ``loss``, ``lr``, ``epoch``, ``eval_loss``,
        ``eval_accuracy``) -> regex with one group, matched against each line of node 0's output, as SageMaker's
        ``metric_definitions``; or ``"huggingface"`` for the Hugging Face Trainer's log lines
        (``trainium_trainer.metric_lines``).
    :param profile_steps: ``(first, last)`` training steps (1-based, both included) each rank profiles with
        ``torch.profiler``; the traces go to ``<output>/profile/`` and the Trainium view links them. The project's
        MNIST trainer honours it; a user's script calls ``trainium_trainer.common.profile.StepProfiler``. On
        Trainium the trace is the host side: the Neuron device profile is not captured yet.

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

    #: Not ``entry_point``, ``command``, ``script`` nor ``code_dir``: what runs is the DAG's, never a run's params.
    template_fields: Sequence[str] = (
        "job_args", "env", "instance_type", "nodes", "processes_per_node", "stack", "compute",
        "capacity_reservation", "image", "output_uri", "checkpoint_uri", "compile_cache_uri", "max_cost_usd",
        "allow_over_budget_estimate",
    )  # fmt: skip
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
        metric_patterns: dict[str, str] | str | None = None,
        profile_steps: tuple[int, int] | list[int] | None = None,
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
        self.metric_patterns = metric_patterns
        self.profile_steps = profile_steps
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
        self._ti: Any = None
        self._result: Any = NO_RESULT
        self._cost: dict[str, Any] | None = None
        if str(compute) in backends():
            # a literal backend declares only its own links (none on local: no empty "Extra Links" section)
            self.operator_extra_links = backend_links(str(compute))

    # -- preparing a try ------------------------------------------------------------------------------
    def pre_submit_checks(self) -> list[PreSubmitCheck]:
        """Every check of the prepared job before find-or-submit (``job_checks``); a subclass appends its own."""
        from airflow_provider_trainium.operators.job_checks import job_checks

        return job_checks(self)

    def prepare(self, context: Context) -> PreparedJob:
        """Backend, validated spec, job name and tags, once per try; bad input fails here, before anything starts."""
        if self._prepared is not None:
            return self._prepared
        from airflow.providers.common.compat.sdk import AirflowFailException

        from airflow_provider_trainium.compute.backends import resolve_compute
        from airflow_provider_trainium.operators.prepared_job import PreparedJob

        ti = context["ti"]
        try:
            compute = resolve_compute(str(self.compute), self.config(), self._nodes())
            backend = self.backend_for(compute)
            prepared = PreparedJob.for_task(compute, self.build_spec(context, self.config(), backend), ti)
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
            spec = prepared.spec_with_evidence_key()
            attached = find_or_submit(backend, spec, prepared.job_name, prepared.tags, self.log.info)
        except JobInputError as err:  # what only the platform could tell (a Spot queue, no such queue)
            raise AirflowFailException(str(err)) from err
        self.remember(context, attached.handle)
        return attached

    def remember(self, context: Context, handle: JobHandle, log_streams: dict[str, str] | None = None) -> None:
        self._handle = handle
        ti = self._ti = context["ti"]
        claim_job(context, self.job_timeout())
        ti.xcom_push(key="job", value=handle.to_dict())
        push_record(context, job_record(handle, log_streams))

    def pre_execute(self, context: Any) -> None:
        """Push the link record before anything can fail, so the links Airflow computes never miss it.

        Also forgets what an earlier try prepared (an operator object may serve several tries).
        """
        self._config, self._node_count, self._prepared, self._result = None, None, None, NO_RESULT
        self._handle, self._ti, self._cost, self._superseded = None, None, None, None
        push_record(context)
        super().pre_execute(context)

    def execute(self, context: Context) -> Any:
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
        trigger = job_trigger(backend, prepared, handle, self.job_timeout(), self.max_cost_usd)
        # the trigger fires at its own deadline first; Airflow's timeout is only the backstop
        self.defer(
            trigger=trigger,
            method_name="execute_complete",
            kwargs={"prepared": prepared.to_dict()},
            timeout=self.job_timeout() + DEFER_GRACE,
        )

    # -- finishing ----------------------------------------------------------------------------------
    def finish(self, context: Context, spec: JobSpec, handle: JobHandle, status: JobStatus) -> Any:
        """Record what the job cost (``job_cost``), then return its result or fail as its end says (``job_finish``)."""
        from airflow_provider_trainium.compute.base import JobState
        from airflow_provider_trainium.operators.job_cost import push_cost, read_cost
        from airflow_provider_trainium.operators.job_finish import job_failure

        cost = read_cost(self, context, spec, handle, status)
        self.raise_if_superseded(context, handle)  # the last moment before this try's first push
        self._cost = push_cost(self, context, cost)
        if status.state is JobState.SUCCEEDED:
            return self.on_success(context, spec, handle)
        raise job_failure(handle, status)

    def on_success(self, context: Context, spec: JobSpec, handle: JobHandle) -> Any:
        """The task's return value: the job's output URI."""
        return spec.output_uri


def __getattr__(name: str) -> Any:
    """The former class names (``deprecated_names``), which warn."""
    return deprecated_names.resolve(__name__, name)
