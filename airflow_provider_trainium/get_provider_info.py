"""Provider metadata read by Airflow's ProvidersManager (entry point ``apache_airflow_provider``)."""

from __future__ import annotations

from typing import Any

from airflow_provider_trainium import __version__
from airflow_provider_trainium.hooks.trainium_fields import CONN_FIELDS, UI_FIELD_BEHAVIOUR


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-trainium",
        "name": "AWS Trainium",
        "description": "Train and fine-tune models on AWS Trainium (Trn1/Trn1n/Trn2) with ECS, "
        "AWS Batch multi-node or local compute.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "AWS Trainium",
                "external-doc-url": "https://aws.amazon.com/machine-learning/trainium/",
                "tags": ["aws"],
            }
        ],
        "hooks": [
            {
                "integration-name": "AWS Trainium",
                "python-modules": [
                    "airflow_provider_trainium.hooks.trainium",
                    "airflow_provider_trainium.hooks.ecs",
                    "airflow_provider_trainium.hooks.batch",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": "AWS Trainium",
                "python-modules": [
                    "airflow_provider_trainium.operators.job",
                    "airflow_provider_trainium.operators.training",
                    "airflow_provider_trainium.operators.compile",
                    "airflow_provider_trainium.operators.registry",
                    "airflow_provider_trainium.operators.image",
                ],
            }
        ],
        "task-decorators": [
            {"name": "trainium", "class-name": "airflow_provider_trainium.decorators.trainium.trainium_task"}
        ],
        "sensors": [
            {
                "integration-name": "AWS Trainium",
                "python-modules": [
                    "airflow_provider_trainium.sensors.job",
                    "airflow_provider_trainium.sensors.registry",
                    "airflow_provider_trainium.sensors.compile_cache",
                ],
            }
        ],
        "triggers": [
            {
                "integration-name": "AWS Trainium",
                "python-modules": [
                    "airflow_provider_trainium.triggers.registry",
                    "airflow_provider_trainium.triggers.ecs",
                    "airflow_provider_trainium.triggers.batch",
                ],
            }
        ],
        "extra-links": [
            "airflow_provider_trainium.links.ecr.EcrImageLink",
            "airflow_provider_trainium.links.ecs.EcsTaskLink",
            "airflow_provider_trainium.links.ecs.EcsTaskLogLink",
            "airflow_provider_trainium.links.batch.BatchJobLink",
            "airflow_provider_trainium.links.batch.BatchNodeLogsLink",
        ],
        "cli": ["airflow_provider_trainium.cli.airflow_commands"],
        "connection-types": [
            {
                "connection-type": "trainium",
                "hook-class-name": "airflow_provider_trainium.hooks.trainium.TrainiumHook",
                "hook-name": "AWS Trainium",
                "conn-fields": CONN_FIELDS,
                "ui-field-behaviour": UI_FIELD_BEHAVIOUR,
            }
        ],
    }
