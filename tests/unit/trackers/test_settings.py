"""Which trackers a run goes to: an operator argument over the connection; a bad log dir fails at the form."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.trackers.settings import TrackerSettings

CONNECTION = {
    "mlflow_tracking_uri": "http://mlflow:5000",
    "mlflow_experiment": "team",
    "tensorboard_logdir": "s3://b/tb",
}


def test_the_connection_turns_trackers_on_and_an_argument_wins():
    config = TrainiumConfig.from_extra(CONNECTION)
    from_connection = TrackerSettings.resolve(config)
    assert from_connection == TrackerSettings("http://mlflow:5000", "team", "s3://b/tb") and from_connection.enabled
    own = TrackerSettings.resolve(config, mlflow_experiment="mine", tensorboard_logdir="file:///tb")
    assert (own.mlflow_tracking_uri, own.mlflow_experiment, own.tensorboard_logdir) == (
        "http://mlflow:5000", "mine", "file:///tb")  # fmt: skip
    assert not TrackerSettings.resolve(TrainiumConfig.from_extra({})).enabled


def test_a_log_dir_outside_s3_and_file_is_refused_by_the_connection_schema():
    with pytest.raises(ValueError, match="tensorboard_logdir"):
        TrainiumConfig.from_extra({"tensorboard_logdir": "/var/tb"})
