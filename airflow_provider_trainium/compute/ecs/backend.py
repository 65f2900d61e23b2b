"""Single-instance training on an ECS cluster of Trainium container instances.

``submit`` registers (or reuses) the task definition of the spec's instance type and runs one task
with the job's command and environment as overrides, ``startedBy`` set to the deterministic job name.
``find_existing`` lists that ``startedBy`` among RUNNING *and* STOPPED tasks, so a retry attaches to a
task an earlier try started, or sees that it already succeeded, instead of starting a second one.
Everything that can be checked before paying for an instance is checked first: the connection's
settings, the spec (one node, an image, overrides within limits) and the cluster.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

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
from airflow_provider_trainium.compute.ecs.definitions import (
    MAX_OVERRIDES_CHARS,
    EcsTaskSettings,
    container_overrides,
    log_stream_name,
    overrides_size,
    task_definition,
)
from airflow_provider_trainium.compute.ecs.status import STOPPED, task_id, task_status
from airflow_provider_trainium.compute.ecs.watch import EcsTaskWatch
from airflow_provider_trainium.compute.remote import remote_launch_problem
from airflow_provider_trainium.compute.watch import WatchedBackend
from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig
from airflow_provider_trainium.neuron.plan import ContainerPlan
from airflow_provider_trainium.neuron.spec import JobSpec

_TAG_UNSAFE = re.compile(r"[^\w\s+\-=.:/@]")
#: What RunTask's ``failures[].reason`` means for a Trainium task.
PLACEMENT_REASONS = {
    "RESOURCE:CPU": "no container instance has enough free CPU",
    "RESOURCE:MEMORY": "no container instance has enough free memory",
    "RESOURCE:ENI": "no container instance has a free network interface for awsvpc",
    "ATTRIBUTE": "no container instance matches the placement constraint (instance type)",
    "AGENT": "the ECS agent of the chosen container instance is disconnected",
    "MISSING": "a resource named in the request does not exist",
}


class EcsInputError(JobInputError):
    """Bad configuration or spec for ECS: fails the task without retries, before anything is paid for."""


class EcsPlacementError(RuntimeError):
    """RunTask could not place the task. Retried only as often as the task's own retries allow."""


def tag_value(value: str) -> str:
    return _TAG_UNSAFE.sub("_", value)[:256]


class EcsBackend(WatchedBackend, ComputeBackend):
    """Run one-node jobs as ECS tasks; wait for them in the triggerer (or in the worker)."""

    name = "ecs"
    defers = True

    def __init__(
        self,
        config: TrainiumConfig,
        *,
        poll_interval_seconds: float = 30.0,
        placement_timeout_seconds: float = 1800.0,
    ) -> None:
        problems = []
        if not config.ecs_cluster:
            problems.append("ecs_cluster is not set")
        if not config.subnets:
            problems.append("subnets is empty (ECS tasks use awsvpc networking and need at least one subnet)")
        if not config.log_group:
            problems.append("log_group is not set (the task's output goes to CloudWatch Logs)")
        if problems:
            raise EcsInputError("the trainium connection cannot run compute='ecs': " + "; ".join(problems))
        assert config.ecs_cluster  # refused above when unset
        self.config = config
        self.cluster: str = config.ecs_cluster
        self.poll_interval_seconds = poll_interval_seconds
        self.placement_timeout_seconds = placement_timeout_seconds
        self._clusters_checked: set[str] = set()

    @classmethod
    def from_config(cls, config: TrainiumConfig, options: dict[str, Any]) -> EcsBackend:
        """The operator's ``poll_interval`` and ``placement_timeout``, where it sets them."""
        timing = float_options(
            options, poll_interval_seconds="poll_interval", placement_timeout_seconds="placement_timeout"
        )
        return cls(config, **timing)

    @cached_property
    def hook(self) -> Any:
        from airflow_provider_trainium.hooks.ecs import TrainiumEcsHook

        return TrainiumEcsHook(aws_conn_id=self.config.aws_conn_id, region_name=self.config.region_name)

    @property
    def region_name(self) -> str:
        region: str = self.hook.region_name or self.hook.conn.meta.region_name
        return region

    # -- checks before anything is paid for ---------------------------------------------------------
    def check(self, spec: JobSpec) -> None:
        """Everything about the connection and ``spec`` that rules out ECS, before any API call."""
        self.check_spec(spec)

    def target(self, spec: JobSpec) -> tuple[str, str | None]:
        """(cluster, capacity provider) of the job: its reservation's (``capacity_reservations``), else the
        connection's ``ecs_cluster`` and ``ecs_capacity_provider``."""
        if spec.capacity_reservation:
            from airflow_provider_trainium.compute.reservations import reservation_route

            route = reservation_route(self.config, spec.capacity_reservation, self.name)
            return str(route.ecs_cluster), route.ecs_capacity_provider
        return self.cluster, self.config.ecs_capacity_provider

    def check_spec(self, spec: JobSpec) -> None:
        from airflow_provider_trainium.compute.reservations import ReservationError

        problems = spec.problems()
        if spec.capacity_reservation and not problems:
            try:
                self.target(spec)
            except ReservationError as err:
                problems.append(str(err))
        if spec.nodes > 1:
            problems.append(
                f"compute='ecs' runs one instance per job, but nodes={spec.nodes}: use compute='batch' "
                "(AWS Batch multi-node parallel jobs) for multi-node training"
            )
        if not spec.image:
            problems.append("no image: set the operator's image or the trainium connection's image")
        storage = remote_launch_problem(spec, self.config.artifact_root, self.name)
        if storage:
            problems.append(storage)
        if not problems:
            size = overrides_size(container_overrides(self.plan(spec)))
            if size > MAX_OVERRIDES_CHARS:
                problems.append(
                    f"the job's command and environment take {size} characters, over ECS's limit of "
                    f"{MAX_OVERRIDES_CHARS} for RunTask overrides: pass large values as a URI instead"
                )
        if problems:
            raise EcsInputError("cannot run on ECS: " + "; ".join(problems))

    def check_cluster(self, cluster: str | None = None) -> None:
        cluster = cluster or self.cluster
        if cluster in self._clusters_checked:
            return
        problem = self.hook.cluster_problem(cluster)
        if problem:
            field = "ecs_cluster" if cluster == self.cluster else "capacity_reservations"
            raise EcsInputError(f"{problem}; check {field} in the trainium connection")
        self._clusters_checked.add(cluster)

    def settings(self, spec: JobSpec) -> EcsTaskSettings:
        return EcsTaskSettings(
            image=str(spec.image),
            log_group=str(self.config.log_group),
            region_name=self.region_name,
            execution_role_arn=self.config.ecs_execution_role_arn,
            task_role_arn=self.config.job_role_arn,
        )

    def run_task_request(
        self, plan: ContainerPlan, task_definition_arn: str, job_name: str, tags: dict[str, str]
    ) -> dict[str, Any]:
        """RunTask arguments on the job's cluster: capacity provider strategy when the connection (or the job's
        reservation) names one, else EC2."""
        spec = plan.spec
        cluster, provider = self.target(spec)
        network: dict[str, Any] = {"subnets": list(self.config.subnets), "assignPublicIp": "DISABLED"}
        if self.config.security_groups:
            network["securityGroups"] = list(self.config.security_groups)
        request: dict[str, Any] = {
            "cluster": cluster,
            "taskDefinition": task_definition_arn,
            "count": 1,
            "startedBy": job_name,
            "networkConfiguration": {"awsvpcConfiguration": network},
            "overrides": container_overrides(plan),
            "tags": [
                {"key": k, "value": tag_value(v)}
                for k, v in sorted({**tags, "trainium:job-name": job_name, SPEC_HASH_TAG: spec.content_hash()}.items())
            ],
            "enableECSManagedTags": True,
        }
        if provider:
            request["capacityProviderStrategy"] = [{"capacityProvider": provider, "weight": 1}]
        else:
            request["launchType"] = "EC2"
        return request

    # -- ComputeBackend -----------------------------------------------------------------------------
    def handle_for(
        self, task: dict[str, Any], job_name: str, spec_hash: str | None = None, cluster: str | None = None
    ) -> JobHandle:
        """The handle of ``task`` (on ``cluster``, default the connection's); its spec hash from the task's tags
        unless given (RunTask may omit tags)."""
        arn = task["taskArn"]
        if spec_hash is None:
            spec_hash = next((t["value"] for t in task.get("tags") or [] if t.get("key") == SPEC_HASH_TAG), None)
        return JobHandle(
            backend=self.name,
            job_id=arn,
            job_name=job_name,
            details={
                "cluster": cluster or self.cluster,
                "task_id": task_id(arn),
                "task_definition_arn": task.get("taskDefinitionArn"),
                "region_name": self.region_name,
                "partition": self.hook.conn_partition,
                "log_group": self.config.log_group,
                "log_stream": log_stream_name(task_id(arn)),
                "spec_hash": spec_hash,
            },
        )

    def find_existing(self, job_name: str, tags: dict[str, str]) -> JobHandle | None:
        """The task an earlier try started, on the connection's cluster or any reservation's."""
        from airflow_provider_trainium.compute.reservations import mapped_targets

        self.check_cluster()
        found = [(task, self.cluster) for task in self.hook.tasks_started_by(self.cluster, job_name)]
        for cluster in sorted(mapped_targets(self.config, "ecs_cluster") - {self.cluster}):
            found += [(task, cluster) for task in self.reserved_tasks(cluster, job_name)]
        if not found:
            return None

        def rank(item: tuple[dict[str, Any], str]) -> tuple[bool, float]:
            created = item[0].get("createdAt")
            return (item[0].get("lastStatus") != STOPPED, created.timestamp() if created else 0.0)

        task, cluster = max(found, key=rank)
        return self.handle_for(task, job_name, cluster=cluster)

    def reserved_tasks(self, cluster: str, job_name: str) -> list[dict[str, Any]]:
        """The tasks with this ``startedBy`` on a reservation's cluster; none when ECS has no such cluster (no
        task can run there, and the job of a reservation mapped to it is refused at its own check)."""
        from botocore.exceptions import ClientError

        try:
            tasks: list[dict[str, Any]] = self.hook.tasks_started_by(cluster, job_name)
            return tasks
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ClusterNotFoundException":
                return []
            raise

    def submit(self, spec: JobSpec, job_name: str, tags: dict[str, str]) -> JobHandle:
        from airflow_provider_trainium.compute.capacity import refuse_unplaceable

        self.check_spec(spec)
        cluster, _ = self.target(spec)
        self.check_cluster(cluster)
        refuse_unplaceable(self.config, spec.instance_type, spec.nodes, EcsInputError)
        plan = self.plan(spec)
        arn, _ = self.hook.ensure_task_definition(task_definition(plan, self.settings(spec)))
        response = self.hook.conn.run_task(**self.run_task_request(plan, arn, job_name, tags))
        tasks = response.get("tasks") or []
        if response.get("failures") or not tasks:
            raise EcsPlacementError(self.placement_message(spec, response.get("failures") or []))
        return self.handle_for(tasks[0], job_name, spec.content_hash(), cluster)

    def placement_message(self, spec: JobSpec, failures: list[dict[str, Any]]) -> str:
        reasons = [
            f"{f.get('reason')}: {PLACEMENT_REASONS.get(str(f.get('reason')), f.get('detail') or 'see ECS docs')}"
            for f in failures
        ] or ["RunTask returned no task and no failure"]
        cluster, provider = self.target(spec)
        where = f"capacity provider {provider!r}" if provider else "its registered container instances"
        if spec.capacity_reservation:
            where += f" (capacity reservation {spec.capacity_reservation}, whose own state is not checked)"
        return (
            f"ECS could not place the {spec.instance_type} task in cluster {cluster!r} ({'; '.join(reasons)}). "
            f"The task needs a whole {spec.instance_type} ({len(spec.instance.neuron_devices)} Neuron device(s)) "
            f"from {where}; check that the cluster has {spec.instance_type} capacity and nothing else running on it"
        )

    def status(self, handle: JobHandle) -> JobStatus:
        tasks = self.hook.describe_tasks(handle.details["cluster"], [handle.job_id])
        if not tasks:
            return JobStatus(JobState.FAILED, reason=f"ECS no longer knows task {handle.job_id}")
        return task_status(tasks[0])

    def cancel(self, handle: JobHandle, reason: str) -> None:
        self.hook.conn.stop_task(cluster=handle.details["cluster"], task=handle.job_id, reason=reason[:255])

    def billed_intervals(self, handle: JobHandle) -> list[Interval]:
        """The task's ``startedAt`` to ``stoppedAt``."""
        from airflow_provider_trainium.compute.ecs.billing import ecs_intervals

        tasks = self.hook.describe_tasks(handle.details["cluster"], [handle.job_id])
        if not tasks:
            raise ValueError(f"ECS does not know task {handle.job_id}: its cost cannot be read")
        return ecs_intervals(tasks[0])

    #: The trigger shell the triggerer runs this backend's watch loop in.
    trigger_classpath = "airflow_provider_trainium.triggers.ecs.TrainiumEcsTaskTrigger"

    def watch(self, request: WatchRequest) -> EcsTaskWatch:
        """The watch loop of the request's job: what the trigger serializes, runnable in any process."""
        handle = request.handle
        return EcsTaskWatch(
            handle=handle.to_dict(),
            deadline=request.deadline,
            aws_conn_id=self.config.aws_conn_id,
            region_name=self.region_name,
            poll_interval=self.poll_interval_seconds,
            placement_timeout=self.placement_timeout_seconds,
            log_cursor_uri=request.log_cursor_uri,
            budget=request.budget,
        )
