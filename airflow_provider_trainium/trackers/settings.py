"""Where a run's export goes: operator arguments over the ``trainium`` connection's extras."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig


@dataclass(frozen=True)
class TrackerSettings:
    """None turns that exporter off; MLflow's experiment defaults to the DAG id."""

    mlflow_tracking_uri: str | None = None
    mlflow_experiment: str | None = None
    tensorboard_logdir: str | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.mlflow_tracking_uri or self.tensorboard_logdir)

    @classmethod
    def resolve(
        cls,
        config: TrainiumConfig,
        *,
        mlflow_tracking_uri: str | None = None,
        mlflow_experiment: str | None = None,
        tensorboard_logdir: str | None = None,
    ) -> TrackerSettings:
        """An argument wins over the connection, so one DAG (``default_args``) can differ from the rest."""
        return cls(
            mlflow_tracking_uri=mlflow_tracking_uri or config.mlflow_tracking_uri,
            mlflow_experiment=mlflow_experiment or config.mlflow_experiment,
            tensorboard_logdir=tensorboard_logdir or config.tensorboard_logdir,
        )
