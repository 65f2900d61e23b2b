"""The amazon provider's EcsHook plus the three calls Trainium jobs need and it lacks.

- a cluster check that reports a missing cluster instead of failing on an empty list,
- register-or-reuse of a task definition whose family name is its content hash,
- every task a given ``startedBy`` started, RUNNING *and* STOPPED (the amazon operator's reattach only
  finds RUNNING ones, so a retry after the task finished would start it again).
"""

from __future__ import annotations

from typing import Any

from airflow.providers.amazon.aws.hooks.ecs import EcsHook
from botocore.exceptions import ClientError

DESCRIBE_BATCH = 100  # DescribeTasks takes at most 100 tasks per call


class TrainiumEcsHook(EcsHook):
    def cluster_problem(self, cluster: str) -> str | None:
        """Why ``cluster`` cannot run tasks, or None when it is ACTIVE."""
        response = self.conn.describe_clusters(clusters=[cluster])
        clusters = response.get("clusters") or []
        if not clusters:
            reasons = ", ".join(f.get("reason", "?") for f in response.get("failures") or []) or "MISSING"
            return f"ECS cluster {cluster!r} was not found in {self.region_name} ({reasons})"
        status = clusters[0].get("status")
        if status != "ACTIVE":
            return f"ECS cluster {cluster!r} is {status}, not ACTIVE"
        return None

    def ensure_task_definition(self, definition: dict[str, Any]) -> tuple[str, bool]:
        """The ARN of the ACTIVE task definition of ``definition['family']``; registered only if missing.

        Returns ``(arn, registered)``. The family name carries the content hash, so an existing ACTIVE
        revision has the same content.
        """
        family = definition["family"]
        try:
            existing = self.conn.describe_task_definition(taskDefinition=family)["taskDefinition"]
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") not in ("ClientException", "InvalidParameterException"):
                raise
        else:
            if existing.get("status") == "ACTIVE":
                return existing["taskDefinitionArn"], False
        registered = self.conn.register_task_definition(**definition)["taskDefinition"]
        return registered["taskDefinitionArn"], True

    def task_arns_started_by(self, cluster: str, started_by: str) -> list[str]:
        arns: list[str] = []
        paginator = self.conn.get_paginator("list_tasks")
        for desired in ("RUNNING", "STOPPED"):
            for page in paginator.paginate(cluster=cluster, startedBy=started_by, desiredStatus=desired):
                arns.extend(a for a in page.get("taskArns", []) if a not in arns)
        return arns

    def describe_tasks(self, cluster: str, task_arns: list[str]) -> list[dict[str, Any]]:
        tasks: list[dict[str, Any]] = []
        for start in range(0, len(task_arns), DESCRIBE_BATCH):
            chunk = task_arns[start : start + DESCRIBE_BATCH]
            tasks.extend(self.conn.describe_tasks(cluster=cluster, tasks=chunk, include=["TAGS"])["tasks"])
        return tasks

    def tasks_started_by(self, cluster: str, started_by: str) -> list[dict[str, Any]]:
        """Every task ECS still knows (stopped ones for about an hour) with this ``startedBy``."""
        arns = self.task_arns_started_by(cluster, started_by)
        return self.describe_tasks(cluster, arns) if arns else []
