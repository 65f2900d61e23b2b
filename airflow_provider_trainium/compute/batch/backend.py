"""AWS Batch compute: multi-node parallel training on Trn1/Trn1n/Trn2 with EFA, never a duplicate job.

The job definition comes from the spec (see :mod:`compute.batch.definitions`) and is registered once per content
(its name is a hash of it). Jobs carry the task instance's tags and a deterministic name, so a retry or a
restarted worker finds the job it already submitted, in any status, and waits on it instead of submitting
again; a job that succeeded is not rerun.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, cast

from airflow_provider_trainium.compute.base import (
    SPEC_HASH_TAG,
    ComputeBackend,
    Interval,
    JobHandle,
    JobInputError,
    JobState,
    JobStatus,
    WatchRequest,
    float_options,
)
from airflow_provider_trainium.compute.batch import definitions as defs
from airflow_provider_trainium.compute.batch.status import CANCEL_PREFIX, batch_state, exit_code
from airflow_provider_trainium.compute.batch.watch import BatchJobWatch
from airflow_provider_trainium.compute.remote import remote_launch_problem
from airflow_provider_trainium.compute.watch import WatchedBackend
from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig
from airflow_provider_trainium.neuron.plan import ContainerPlan
from airflow_provider_trainium.neuron.spec import JobSpec

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.batch import TrainiumBatchHook


#: Compute resource types on which AWS Batch runs no multi-node parallel job.
SPOT_TYPES = frozenset({"SPOT", "FARGATE_SPOT"})


class BatchClient(Protocol):
    """The boto3 Batch calls this backend makes. The amazon provider types its hook's client as its own
    ``BatchProtocol``, which lacks DescribeComputeEnvironments, DescribeJobQueues and RegisterJobDefinition."""

    def describe_compute_environments(self, **kwargs: Any) -> dict[str, Any]: ...
    def describe_job_queues(self, **kwargs: Any) -> dict[str, Any]: ...
    def register_job_definition(self, **kwargs: Any) -> dict[str, Any]: ...
    def submit_job(self, **kwargs: Any) -> dict[str, Any]: ...
    def terminate_job(self, **kwargs: Any) -> dict[str, Any]: ...


class _Timing(TypedDict, total=False):
    poll_interval: float
    log_interval: float


class BatchInputError(JobInputError):
    """A job Batch must not be sent (wrong storage, wrong queue): fails the task before anything is paid for."""


class BatchBackend(WatchedBackend, ComputeBackend):
    """Runs a job spec as an AWS Batch job on the queue the connection names for its instance type.

    :param poll_interval: seconds between DescribeJobs rounds of the shared poller (and the worker wait).
    :param log_interval: seconds between reads of the nodes' CloudWatch streams.
    :param privileged: run the container privileged (the only way Batch grants IPC_LOCK; off by default).
    """

    name = "batch"
    defers = True

    def __init__(
        self,
        config: TrainiumConfig,
        *,
        poll_interval: float = 30.0,
        log_interval: float = 30.0,
        privileged: bool = False,
        host_retry_attempts: int = defs.HOST_RETRY_ATTEMPTS,
    ) -> None:
        self.config = config
        self.poll_interval = poll_interval
        self.log_interval = log_interval
        self.settings = defs.BatchSettings(
            region_name=config.region_name,
            log_group=config.log_group,
            job_role_arn=config.job_role_arn,
            execution_role_arn=config.ecs_execution_role_arn,
            privileged=privileged,
            host_retry_attempts=host_retry_attempts,
        )

    @classmethod
    def from_config(cls, config: TrainiumConfig, options: dict[str, Any]) -> BatchBackend:
        """The operator's ``poll_interval`` and ``log_interval``, where it sets them."""
        timing = float_options(options, poll_interval="poll_interval", log_interval="log_interval")
        return cls(config, **cast(_Timing, timing))

    @cached_property
    def hook(self) -> TrainiumBatchHook:
        from airflow_provider_trainium.hooks.batch import TrainiumBatchHook

        return TrainiumBatchHook(aws_conn_id=self.config.aws_conn_id, region_name=self.config.region_name)

    @property
    def client(self) -> BatchClient:
        """The hook's boto3 Batch client (a botocore client, which has every Batch call)."""
        return cast(BatchClient, self.hook.client)

    # -- what to submit ---------------------------------------------------------------------------------
    def job_queue(self, instance_type: str, capacity_reservation: str | None = None) -> str:
        """The queue of the job's reservation (``capacity_reservations``), else of its instance type."""
        if capacity_reservation:
            from airflow_provider_trainium.compute.reservations import reservation_route

            return str(reservation_route(self.config, capacity_reservation, self.name).batch_job_queue)
        queue = self.config.batch_job_queues.get(instance_type)
        if not queue:
            known = ", ".join(sorted(self.config.batch_job_queues)) or "none"
            raise ValueError(
                f"the trainium connection has no Batch job queue for {instance_type} (batch_job_queues has: {known})"
            )
        return queue

    def check(self, spec: JobSpec) -> None:
        """Everything that can be wrong with ``spec`` on Batch, raised before any API call."""
        self.checked_definition(self.plan(spec))

    def checked_definition(self, plan: ContainerPlan) -> dict[str, Any]:
        """The job definition for the plan, after every check that needs no API call."""
        spec = plan.spec
        definition = defs.build_job_definition(plan, self.settings)
        problem = remote_launch_problem(spec, self.config.artifact_root, self.name)
        if problem:
            raise BatchInputError(problem)
        self.job_queue(spec.instance_type, spec.capacity_reservation)
        return definition

    def check_queue(self, queue: str, spec: JobSpec) -> None:
        """Refuse what the queue can never run, before SubmitJob: a multi-node job on a Spot compute environment
        (Batch runs none), a layout above every environment's ``maxvCpus`` or above the account's On-Demand Trn
        vCPU quota (``preflight.capacity``). Such a job would only wait in RUNNABLE. One that must wait for
        capacity is logged with the numbers. DescribeJobQueues, DescribeComputeEnvironments and GetServiceQuota
        cost nothing."""
        from airflow_provider_trainium.compute.capacity import refuse_unplaceable

        client = self.client
        arns = [o["computeEnvironment"] for o in self.require_queue(queue).get("computeEnvironmentOrder", [])]
        environments = client.describe_compute_environments(computeEnvironments=arns).get("computeEnvironments", [])
        spot = sorted(
            env["computeEnvironmentName"]
            for env in environments
            if (env.get("computeResources") or {}).get("type") in SPOT_TYPES
        )
        if spot and spec.nodes > 1:
            raise BatchInputError(
                f"job queue {queue!r} runs on Spot compute environment(s) {', '.join(spot)}, and AWS Batch does not "
                f"run multi-node parallel jobs on Spot: this {spec.nodes}-node {spec.instance_type} job would never "
                "start. Point batch_job_queues at an on-demand queue (the Batch stack with PurchaseOption on-demand)"
            )
        refuse_unplaceable(self.config, spec.instance_type, spec.nodes, BatchInputError, queue, environments)

    def register_definition(self, definition: dict[str, Any]) -> str:
        """The ARN of an ACTIVE definition with this (content-hash) name, registering it if there is none."""
        existing = self.hook.active_definition(definition["jobDefinitionName"])
        if existing is not None:
            arn: str = existing["jobDefinitionArn"]
            return arn
        response = self.client.register_job_definition(
            **definition, tags={"trainium:managed-by": "airflow-provider-trainium"}
        )
        registered: str = response["jobDefinitionArn"]
        return registered

    # -- ComputeBackend -------------------------------------------------------------------------------
    def submit(self, spec: JobSpec, job_name: str, tags: dict[str, str]) -> JobHandle:
        plan = self.plan(spec)
        definition = self.checked_definition(plan)
        queue = self.job_queue(spec.instance_type, spec.capacity_reservation)
        self.check_queue(queue, spec)
        spec_hash = spec.content_hash()
        request = defs.submit_request(
            plan,
            job_name=job_name,
            job_queue=queue,
            job_definition=definition["jobDefinitionName"],
            tags={**tags, SPEC_HASH_TAG: spec_hash},
        )
        defs.validate_node_overrides(definition, request)
        request["jobDefinition"] = self.register_definition(definition)
        response = self.client.submit_job(**request)
        return self._handle(response["jobId"], job_name, queue, spec.nodes, request["jobDefinition"], spec_hash)

    def _handle(
        self, job_id: str, job_name: str, queue: str, nodes: int, definition: str, spec_hash: str | None
    ) -> JobHandle:
        return JobHandle(
            self.name,
            job_id,
            job_name,
            {
                "job_queue": queue,
                "num_nodes": nodes,
                "job_definition": definition,
                "region_name": self.hook.region_name,
                "log_group": self.settings.log_group,
                "spec_hash": spec_hash,
            },
        )

    def jobs_named(self, queue: str, job_name: str) -> list[dict[str, Any]]:
        """The queue's jobs with this name. A queue Batch does not know is the connection's error, not the
        platform's: ListJobs refuses it (ClientException), and a retry would ask the same queue again."""
        from botocore.exceptions import ClientError

        try:
            return list(self.hook.list_jobs_named(queue, job_name))
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ClientException":
                self.require_queue(queue)
            raise

    def require_queue(self, queue: str) -> dict[str, Any]:
        """The queue's description; a :class:`BatchInputError` naming it when Batch has no such queue."""
        queues = self.client.describe_job_queues(jobQueues=[queue]).get("jobQueues", [])
        if not queues:
            raise BatchInputError(
                f"AWS Batch has no job queue {queue!r} (batch_job_queues or capacity_reservations of the trainium "
                "connection)"
            )
        described: dict[str, Any] = queues[0]
        return described

    def find_existing(self, job_name: str, tags: dict[str, str]) -> JobHandle | None:
        """The newest job with this name and these tags on any of the connection's queues (a reservation's
        included), in any status."""
        from airflow_provider_trainium.compute.reservations import mapped_targets

        queues = sorted(set(self.config.batch_job_queues.values()) | mapped_targets(self.config, "batch_job_queue"))
        summaries = [s for queue in queues for s in self.jobs_named(queue, job_name)]
        if not summaries:
            return None
        jobs = [j for j in self.hook.describe_jobs([s["jobId"] for s in summaries]) if _tagged(j, tags)]
        if not jobs:
            return None
        job = max(jobs, key=lambda j: j.get("createdAt", 0))
        nodes = int((job.get("nodeProperties") or {}).get("numNodes", 1))
        queue = _queue_name(job.get("jobQueue", ""), queues)
        spec_hash = (job.get("tags") or {}).get(SPEC_HASH_TAG)
        return self._handle(job["jobId"], job_name, queue, nodes, job.get("jobDefinition", ""), spec_hash)

    def status(self, handle: JobHandle) -> JobStatus:
        jobs = self.hook.describe_jobs([handle.job_id])
        if not jobs:
            return JobStatus(JobState.FAILED, reason=f"AWS Batch does not know job {handle.job_id}")
        job = jobs[0]
        return JobStatus(batch_state(job), reason=str(job.get("statusReason", "")), exit_code=exit_code(job))

    def cancel(self, handle: JobHandle, reason: str) -> None:
        self.client.terminate_job(jobId=handle.job_id, reason=f"{CANCEL_PREFIX}{reason}")

    def billed_intervals(self, handle: JobHandle) -> list[Interval]:
        """Every attempt of every node job (``<id>#i``) of a multi-node job, or the job's own attempts."""
        from airflow_provider_trainium.compute.batch.billing import described_intervals

        return described_intervals(self.hook.describe_jobs, handle.job_id)

    #: The trigger shell the triggerer runs this backend's watch loop in.
    trigger_classpath = "airflow_provider_trainium.triggers.batch.TrainiumBatchJobTrigger"

    def watch(self, request: WatchRequest) -> BatchJobWatch:
        """The watch loop of the request's job: what the trigger serializes, runnable in any process."""
        handle = request.handle
        return BatchJobWatch(
            handle=handle.to_dict(),
            deadline=request.deadline,
            aws_conn_id=self.config.aws_conn_id,
            region_name=self.config.region_name,
            num_nodes=int(handle.details.get("num_nodes", 1)),
            log_group=handle.details.get("log_group") or self.settings.log_group,
            poll_interval=self.poll_interval,
            log_interval=self.log_interval,
            log_cursor_uri=request.log_cursor_uri,
            budget=request.budget,
        )


def _tagged(job: dict[str, Any], tags: dict[str, str]) -> bool:
    have = job.get("tags") or {}
    return all(have.get(k) == v for k, v in tags.items())


def _queue_name(arn_or_name: str, queues: list[str]) -> str:
    name = arn_or_name.rsplit("/", 1)[-1]
    return next((q for q in queues if q == arn_or_name or q.rsplit("/", 1)[-1] == name), name)
