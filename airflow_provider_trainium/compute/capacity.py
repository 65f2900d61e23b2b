"""Whether a layout can ever be placed, and whether it must wait, asked before anything is paid for a wait.

Two limits decide. Every ECS container instance and Batch node counts against the account's vCPU quota for
On-Demand Trn instances (Service Quotas), and a Batch job runs on one of its queue's compute environments,
each capped at ``maxvCpus``. A layout above a limit can never be placed: it would wait RUNNABLE (or
PROVISIONING) for its whole timeout, so it is refused. One within the limits but above what is free now
(the quota's own CloudWatch usage metric; an environment's ``desiredvCpus``) must wait: that is warned about,
with the numbers, and the job goes ahead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

#: "Running On-Demand Trn instances", in vCPUs (docs/fidelity.md says where the code comes from).
TRN_ON_DEMAND_QUOTA = ("ec2", "L-2C3B7624")
#: How far back the quota's usage metric is read: AWS/Usage publishes one point a minute while instances run.
USAGE_WINDOW = timedelta(minutes=15)


@dataclass(frozen=True)
class Quota:
    """A vCPU quota as Service Quotas reports it, and how much of it is in use (None: not known)."""

    name: str
    code: str
    value: float
    in_use: float | None = None


@dataclass
class Findings:
    """What can never be placed (``errors``) and what must wait (``warnings``), each with its numbers."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def extend(self, other: Findings) -> Findings:
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)
        return self


def needed_vcpus(instance_type: str, nodes: int) -> int:
    from airflow_provider_trainium.neuron.catalog import CATALOG

    return nodes * CATALOG[instance_type].vcpus


def _client(config: TrainiumConfig, kind: str) -> Any:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    return AwsBaseHook(aws_conn_id=config.aws_conn_id, client_type=kind, region_name=config.region_name).conn


def _no_such_quota(err: Exception) -> bool:
    from botocore.exceptions import ClientError

    return isinstance(err, ClientError) and err.response.get("Error", {}).get("Code") == "NoSuchResourceException"


def trn_quota(config: TrainiumConfig) -> Quota | None:
    """The account's On-Demand Trn vCPU quota in the connection's region: the applied value, else AWS's default
    (GetServiceQuota answers only for quotas with an applied value). None when Service Quotas knows neither."""
    service, code = TRN_ON_DEMAND_QUOTA
    client = _client(config, "service-quotas")
    try:
        quota = client.get_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]
    except Exception as err:
        if not _no_such_quota(err):
            raise
        quota = _default_quota(client, service, code)
    if quota is None:
        return None
    in_use = quota_usage(config, quota.get("UsageMetric"))
    return Quota(quota.get("QuotaName") or code, code, float(quota["Value"]), in_use)


def _default_quota(client: Any, service: str, code: str) -> dict[str, Any] | None:
    """AWS's default value of the quota, from the service's list (what an account that never asked for an increase
    has); None when Service Quotas does not know the service here."""
    try:
        for page in client.get_paginator("list_aws_default_service_quotas").paginate(ServiceCode=service):
            for quota in page.get("Quotas", []):
                if quota.get("QuotaCode") == code:
                    return dict(quota)
    except Exception as err:
        if _no_such_quota(err):
            return None
        raise
    return None


def quota_usage(config: TrainiumConfig, metric: dict[str, Any] | None) -> float | None:
    """The newest value of the quota's usage metric (the one Service Quotas names for it); 0 when the window has
    no point (nothing of the class runs), None when the quota names no metric."""
    if not metric or not metric.get("MetricName"):
        return None
    now = datetime.now(UTC)
    statistic = metric.get("MetricStatisticRecommendation") or "Maximum"
    points = _client(config, "cloudwatch").get_metric_statistics(
        Namespace=metric["MetricNamespace"],
        MetricName=metric["MetricName"],
        Dimensions=[{"Name": k, "Value": v} for k, v in (metric.get("MetricDimensions") or {}).items()],
        StartTime=now - USAGE_WINDOW,
        # one period past now: CloudWatch compares whole seconds (EndTime exclusive), and a point stamped in
        # this very second would fall outside an EndTime of now; no point lies in the future
        EndTime=now + timedelta(seconds=60),
        Period=60,
        Statistics=[statistic],
    )["Datapoints"]
    if not points:
        return 0.0
    return float(max(points, key=lambda p: p["Timestamp"])[statistic])


def quota_findings(quota: Quota, instance_type: str, nodes: int) -> Findings:
    needed = needed_vcpus(instance_type, nodes)
    found = Findings()
    what = f"{nodes} x {instance_type} need {needed} vCPUs"
    limit = f"the account's quota {quota.name!r} ({quota.code}) of {quota.value:g} vCPUs"
    if needed > quota.value:
        found.errors.append(f"{what}, more than {limit}: ask Service Quotas for an increase")
    elif quota.in_use is not None and quota.in_use + needed > quota.value:
        found.warnings.append(
            f"{what}; {quota.in_use:g} of {limit} are in use, so the job waits until {needed} are free"
        )
    return found


def environment_findings(
    environments: Iterable[dict[str, Any]], queue: str, instance_type: str, nodes: int
) -> Findings:
    """A Batch job runs on one of its queue's managed environments: none with ``maxvCpus`` for the layout means it
    is never placed; all of those busy (``desiredvCpus`` leaves too little) means it waits. Unmanaged ones are not
    judged (their instances are whatever was registered)."""
    needed = needed_vcpus(instance_type, nodes)
    managed = [e for e in environments if e.get("computeResources")]
    found = Findings()
    if not managed:
        return found

    def limit(env: dict[str, Any]) -> int:
        return int(env["computeResources"].get("maxvCpus") or 0)

    def busy(env: dict[str, Any]) -> int:
        return int(env["computeResources"].get("desiredvCpus") or 0)

    fits = [e for e in managed if limit(e) >= needed]
    names = ", ".join(f"{e['computeEnvironmentName']} (maxvCpus {limit(e)})" for e in managed)
    if not fits:
        found.errors.append(
            f"{nodes} x {instance_type} need {needed} vCPUs, more than any compute environment of queue {queue!r} "
            f"can start: {names}. Raise MaxvCpus in the Batch stack or use fewer nodes"
        )
    elif all(limit(e) - busy(e) < needed for e in fits):
        loads = ", ".join(f"{e['computeEnvironmentName']} {busy(e)} of {limit(e)}" for e in fits)
        found.warnings.append(
            f"{nodes} x {instance_type} need {needed} vCPUs, and every compute environment of queue {queue!r} "
            f"that can hold them is busy (desiredvCpus of maxvCpus: {loads}): the job waits for running jobs"
        )
    return found


def refuse_unplaceable(
    config: TrainiumConfig,
    instance_type: str,
    nodes: int,
    refuse: type[Exception],
    queue: str | None = None,
    environments: Iterable[dict[str, Any]] = (),
) -> None:
    """At submit time: raise ``refuse`` when the layout can never be placed, log when it must wait. A quota that
    cannot be read (no permission, Service Quotas not answering) is logged and not held against the job: the
    preflight task already reported it."""
    import logging

    log = logging.getLogger(__name__)
    try:
        quota = trn_quota(config)
    except Exception as err:  # noqa: BLE001 - the quota informs; the platform still decides
        log.warning("the On-Demand Trn vCPU quota could not be read, so it is not checked: %s", err)
        quota = None
    found = placement_findings(quota, instance_type, nodes, queue, environments)
    if found.errors:
        raise refuse("this layout can never be placed: " + "; ".join(found.errors))
    for line in found.warnings:
        log.warning("%s", line)


def placement_findings(
    quota: Quota | None,
    instance_type: str,
    nodes: int,
    queue: str | None = None,
    environments: Iterable[dict[str, Any]] = (),
) -> Findings:
    """The quota's findings (none when it is not known) and, for a Batch ``queue``, its ``environments``'."""
    found = quota_findings(quota, instance_type, nodes) if quota is not None else Findings()
    if queue:
        found.extend(environment_findings(environments, queue, instance_type, nodes))
    return found
