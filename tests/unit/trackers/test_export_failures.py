"""An exporter that cannot export (server down, package missing, bad log dir) warns and lets the task succeed."""

from __future__ import annotations

import logging
import sys

import pytest

from airflow_provider_trainium.trackers.export import export_run
from airflow_provider_trainium.trackers.gather import Point, RunExport, TaskInstanceId
from airflow_provider_trainium.trackers.settings import TrackerSettings
from tests.conftest import free_port

LOG = logging.getLogger("trackers-test")


def export() -> RunExport:
    return RunExport(TaskInstanceId("dag", "run", "train"), {"nodes": "1"},
                     {"train/loss": [Point(1, 2.0, 1_700_000_000_000)]}, {"final/accuracy": 0.9})  # fmt: skip


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.process
def test_a_tracking_server_that_is_down_is_a_warning_naming_it(caplog, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with caplog.at_level(logging.INFO):
        results = export_run(export(), TrackerSettings(mlflow_tracking_uri=uri), None, LOG)
    assert results == {"mlflow": None}
    (message,) = warnings(caplog)
    assert message.startswith(f"MLflow export to {uri} failed: ") and "Connection" in message
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(
    "package,settings,extra",
    [
        ("mlflow", TrackerSettings(mlflow_tracking_uri="http://127.0.0.1:1"), "airflow-provider-trainium[mlflow]"),
        ("tensorboardX", TrackerSettings(tensorboard_logdir="file:///tmp/x"), "airflow-provider-trainium[tensorboard]"),
    ],
)
def test_a_missing_package_names_the_extra_to_install(caplog, monkeypatch, package, settings, extra):
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, package, None)  # what Python does for a package that is not installed
    results = export_run(export(), settings, None, LOG)
    assert list(results.values()) == [None]
    (message,) = warnings(caplog)
    assert f"{package} is not installed (pip install '{extra}')" in message


def test_a_log_dir_on_an_unsupported_scheme_is_a_warning(caplog, tmp_path):
    results = export_run(export(), TrackerSettings(tensorboard_logdir="gs://bucket/tb"), None, LOG)
    assert results == {"tensorboard": None}
    (message,) = warnings(caplog)
    assert "TensorBoard export to gs://bucket/tb failed" in message and "unsupported URI" in message


def test_nothing_is_exported_or_read_when_no_tracker_is_configured():
    assert not TrackerSettings().enabled
    assert export_run(export(), TrackerSettings(), None, LOG) == {}
