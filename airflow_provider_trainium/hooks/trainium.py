"""The ``trainium`` connection: where jobs run and where artifacts go.

One connection (``trainium_default``) holds what the CloudFormation stack created. Without it,
everything runs on local compute with ``file://$AIRFLOW_HOME/trainium`` as the artifact root.

It holds only the hook: ``TrainiumConfig``, ``check_extra`` and ``default_artifact_root`` live in
``hooks.trainium_config`` and are exported from here on first use; ``DEFAULT_CONN_ID`` lives with the connection's
fields (``hooks.trainium_fields``), which DAG files read while they are parsed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import BaseHook

from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig


class TrainiumHook(BaseHook):
    """Reads the ``trainium`` connection. Holds no AWS client: backends open the amazon hooks they need."""

    conn_name_attr = "trainium_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = "trainium"
    hook_name = "AWS Trainium"

    def __init__(self, trainium_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.trainium_conn_id = trainium_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """For Airflow before 3.2, which reads the form from the hook; later ones read provider info."""
        from airflow_provider_trainium.hooks.trainium_fields import UI_FIELD_BEHAVIOUR  # a form, not parse time

        return {key.replace("-", "_"): value for key, value in UI_FIELD_BEHAVIOUR.items()}

    def get_config(self) -> TrainiumConfig:
        """The connection's settings; the local defaults when the default connection does not exist."""
        from airflow.providers.common.compat.sdk import AirflowNotFoundException

        from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

        try:
            conn = self.get_connection(self.trainium_conn_id)
        except AirflowNotFoundException:
            if self.trainium_conn_id != DEFAULT_CONN_ID:
                raise
            return TrainiumConfig()
        return TrainiumConfig.from_extra(conn.extra_dejson)

    def test_connection(self) -> tuple[bool, str]:
        """Check that what the extras point at exists: cluster, queues, bucket, repository (Test button)."""
        from airflow_provider_trainium.hooks.connection_test import check_resources

        try:
            config = self.get_config()
        except ValueError as err:
            return False, str(err)
        problems, checked = check_resources(config)
        if problems:
            return False, "; ".join(problems)
        return True, "found " + ", ".join(checked) if checked else "no AWS resources configured (local compute)"


#: Names this module exports from ``hooks.trainium_config``, imported on first use (see its docstring).
_FROM_CONFIG = ("TrainiumConfig", "check_extra", "default_artifact_root")


def __getattr__(name: str) -> Any:
    if name in _FROM_CONFIG:
        from airflow_provider_trainium.hooks import trainium_config

        return getattr(trainium_config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
