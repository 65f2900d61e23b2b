"""Provider info: Airflow reads the connection form from it, and the schema there checks the extras."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import airflow
import jsonschema
import pytest

from airflow_provider_trainium.get_provider_info import get_provider_info
from airflow_provider_trainium.hooks.trainium import TrainiumConfig

AIRFLOW_DIR = Path(airflow.__file__).parent


def test_provider_info_is_valid_for_airflow():
    schema = json.loads((AIRFLOW_DIR / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_connection_type_declares_its_form_as_provider_yaml_does():
    yaml_schema = json.loads((AIRFLOW_DIR / "provider.yaml.schema.json").read_text())
    item_schema = yaml_schema["properties"]["connection-types"]["items"]
    (conn,) = get_provider_info()["connection-types"]
    jsonschema.validate(conn, item_schema)
    assert conn["connection-type"] == "trainium" and conn["hook-name"]
    fields = set(conn["conn-fields"])
    assert {"aws_conn_id", "region_name", "artifact_root", "ecs_cluster", "batch_job_queues"} <= fields
    assert set(conn["ui-field-behaviour"]["hidden-fields"]) == {"host", "schema", "login", "password", "port"}
    # every declared field is one TrainiumConfig reads, and the other way round
    assert set(conn["conn-fields"]) == set(TrainiumConfig.__dataclass_fields__) - {"configured"}


def test_providers_manager_offers_the_trainium_form():
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    behaviours = manager.field_behaviours
    assert "password" in behaviours["trainium"]["hidden_fields"]
    widgets = manager.connection_form_widgets
    assert widgets["extra__trainium__artifact_root"].field["schema"]["title"] == "Artifact root"


@pytest.mark.process
def test_airflow_providers_behaviours_lists_trainium():
    out = subprocess.run(
        [sys.executable, "-m", "airflow", "providers", "behaviours", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "trainium" in out


@pytest.mark.parametrize(
    "extra,problem",
    [
        ({"artifact_root": "gs://bucket"}, "artifact_root: 'gs://bucket' does not match"),
        ({"region_name": "Frankfurt"}, "region_name: 'Frankfurt' does not match"),
        ({"batch_job_queues": {"p4d.24xlarge": "q"}}, "batch_job_queues: 'p4d.24xlarge' does not match"),
        ({"batch_job_queues": {"trn1.32xlarge": 3}}, "batch_job_queues.trn1.32xlarge: 3 is not of type 'string'"),
        ({"image_builder": "kaniko"}, "image_builder: 'kaniko' is not one of"),
        ({"job_role_arn": "trainium-job"}, "job_role_arn: 'trainium-job' does not match"),
    ],
)
def test_bad_extras_are_refused_with_the_field_named(extra, problem):
    with pytest.raises(ValueError, match="trainium connection extras are invalid") as err:
        TrainiumConfig.from_extra(extra)
    assert problem in str(err.value)


def test_all_problems_are_reported_at_once():
    with pytest.raises(ValueError) as err:
        TrainiumConfig.from_extra({"artifact_root": "gs://b", "image_builder": "kaniko"})
    assert "artifact_root" in str(err.value) and "image_builder" in str(err.value)
