"""What the ``trainium`` connection's Test button checks: the resources its extras name exist and are usable.

Each check goes through the amazon provider's hook for that service, with the connection's ``aws_conn_id``
and region, so a wrong credential, region or name shows up here instead of when a job is submitted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig


def aws_error_text(err: Exception) -> str:
    """``Code: Message`` of an AWS error (what the connection test and preflight both show), else the text."""
    response = getattr(err, "response", None) or {}
    code = response.get("Error", {}).get("Code")
    return f"{code}: {response['Error'].get('Message', '')}".rstrip(": ") if code else str(err)


def check_cluster(config: TrainiumConfig) -> str | None:
    from airflow.providers.amazon.aws.hooks.ecs import EcsHook

    hook = EcsHook(aws_conn_id=config.aws_conn_id, region_name=config.region_name)
    found = hook.conn.describe_clusters(clusters=[config.ecs_cluster])["clusters"]
    status = found[0]["status"] if found else "MISSING"
    return None if status == "ACTIVE" else f"ECS cluster {config.ecs_cluster} is {status}"


def check_queues(config: TrainiumConfig) -> list[str]:
    from airflow_provider_trainium.hooks.batch import TrainiumBatchHook

    hook = TrainiumBatchHook(aws_conn_id=config.aws_conn_id, region_name=config.region_name)
    names = sorted(set(config.batch_job_queues.values()))
    found = {q["jobQueueName"]: q for q in hook.batch.describe_job_queues(jobQueues=names)["jobQueues"]}
    found.update({q["jobQueueArn"]: q for q in found.values()})
    problems = []
    for instance_type, name in sorted(config.batch_job_queues.items()):
        queue = found.get(name)
        if queue is None:
            problems.append(f"Batch job queue {name} ({instance_type}) not found")
        elif queue.get("state") != "ENABLED" or queue.get("status") not in ("VALID", "UPDATING", "CREATING"):
            problems.append(f"Batch job queue {name} is {queue.get('state')}/{queue.get('status')}")
    return problems


def check_bucket(config: TrainiumConfig) -> str | None:
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    bucket = config.artifact_root.removeprefix("s3://").split("/", 1)[0]
    hook = S3Hook(aws_conn_id=config.aws_conn_id, region_name=config.region_name)
    return None if hook.check_for_bucket(bucket) else f"bucket {bucket} of {config.artifact_root} not found"


def check_repository(config: TrainiumConfig) -> str | None:
    from airflow_provider_trainium.image.container_registry import EcrRegistry, parse_repository

    repository = str(config.ecr_repository)
    registry = parse_repository(repository, aws_conn_id=config.aws_conn_id, region_name=config.region_name)
    if isinstance(registry, EcrRegistry):
        registry.describe()  # ContainerRegistryError naming the repository and region when it does not exist
    return None


def check_resources(config: TrainiumConfig) -> tuple[list[str], list[str]]:
    """(problems, what was checked) for every resource the config names."""
    problems: list[str] = []
    checked: list[str] = []
    checks: list[tuple[str, Callable[[], Sequence[str | None]]]] = []
    if config.ecs_cluster:
        checks.append((f"ECS cluster {config.ecs_cluster}", lambda: [check_cluster(config)]))
    if config.batch_job_queues:
        queues = len(set(config.batch_job_queues.values()))
        checks.append((f"{queues} Batch job queue(s)", lambda: check_queues(config)))
    if config.artifact_root.startswith("s3://"):
        checks.append((f"bucket of {config.artifact_root}", lambda: [check_bucket(config)]))
    if config.ecr_repository:
        checks.append((f"ECR repository {config.ecr_repository}", lambda: [check_repository(config)]))
    for what, check in checks:
        try:
            found = [p for p in check() if p]
        except Exception as err:  # each check reports its own failure; the others still run
            found = [f"{what}: {aws_error_text(err)}"]
        problems.extend(found)
        if not found:
            checked.append(what)
    return problems, checked
