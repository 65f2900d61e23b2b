"""Wait for a model version to be registered, or for an alias to reach a version newer than X."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_provider_trainium import deprecated_names
from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID
from airflow_provider_trainium.registry.names import validate_alias, validate_model_name, validate_version

if TYPE_CHECKING:
    from airflow.sdk import Context


class TrainiumRegisteredModelSensor(BaseSensorOperator):
    """Succeeds when the awaited model version exists; returns ``{"name", "version", "uri", ...}``.

    * ``version=N``: version N is published (its manifest exists).
    * ``alias="production"``: the alias points at a version greater than ``newer_than``.
    * neither: the model's newest version is greater than ``newer_than`` (0: any version).

    :param deferrable: wait in the triggerer instead of holding a worker slot; default Airflow's
        ``[operators] default_deferrable``.
    """

    template_fields: Sequence[str] = ("version", "alias", "newer_than", "artifact_root")

    def __init__(
        self,
        *,
        model_name: str,
        version: int | str | None = None,
        alias: str | None = None,
        newer_than: int | str = 0,
        artifact_root: str | None = None,
        aws_conn_id: str | None = None,
        trainium_conn_id: str = DEFAULT_CONN_ID,
        deferrable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.model_name = validate_model_name(model_name)
        if version is not None and alias is not None:
            raise ValueError("pass version or alias, not both")
        self.version = version
        self.alias = alias
        self.newer_than = newer_than
        self.artifact_root = artifact_root
        self.aws_conn_id = aws_conn_id
        self.trainium_conn_id = trainium_conn_id
        from airflow_provider_trainium.operators.defaults import default_deferrable

        self.deferrable = default_deferrable() if deferrable is None else deferrable

    def _criteria(self) -> tuple[int | None, str | None, int]:
        version = validate_version(self.version) if self.version not in (None, "") else None
        alias = validate_alias(self.alias) if self.alias else None
        newer_than = int(self.newer_than or 0)
        return version, alias, newer_than

    def _registry(self) -> Any:
        from airflow_provider_trainium.registry.config import open_registry

        return open_registry(self.artifact_root, self.aws_conn_id, self.trainium_conn_id)

    def poke(self, context: Context) -> PokeReturnValue:
        from airflow_provider_trainium.triggers.registry import find_model

        found = find_model(self._registry(), self.model_name, *self._criteria())
        return PokeReturnValue(is_done=found is not None, xcom_value=found)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        from airflow_provider_trainium.triggers.registry import TrainiumRegisteredModelTrigger, find_model

        registry = self._registry()
        version, alias, newer_than = self._criteria()
        found = find_model(registry, self.model_name, version, alias, newer_than)
        if found is not None:
            return found
        self.defer(
            trigger=TrainiumRegisteredModelTrigger(
                model_name=self.model_name,
                artifact_root=registry.root_uri,
                conn_id=registry.conn_id,
                version=version,
                alias=alias,
                newer_than=newer_than,
                poke_interval=self.poke_interval,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "success":
            raise RuntimeError(f"waiting for model {self.model_name!r} failed: {event.get('message')}")
        model: dict[str, Any] = event["model"]
        return model


def __getattr__(name: str) -> Any:
    """The former class names (:mod:`airflow_provider_trainium.deprecated_names`)."""
    return deprecated_names.resolve(__name__, name)
