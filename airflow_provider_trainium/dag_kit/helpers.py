"""Helpers for task bodies (they run in the worker), so DAG code never reaches into the provider's internals: the
connection's settings, where a run's artifacts live, the evaluation job's numbers and a registered model.

Everything a helper needs beyond the connection's name loads when it is called, not when a DAG file imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID
from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig
    from airflow_provider_trainium.registry import ModelVersion


def trainium_config(trainium_conn_id: str = DEFAULT_CONN_ID) -> TrainiumConfig:
    """The ``trainium`` connection's settings (local defaults without one)."""
    from airflow_provider_trainium.hooks.trainium import TrainiumHook

    return TrainiumHook(trainium_conn_id).get_config()


def fail_on_mismatch(call: Callable[[], Any]) -> Any:
    """``call()``, with an XCom that disagrees with the derived location failing the task for good: a retry would
    read the same edited XCom."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_trainium.operators.run_outputs import XComMismatchError

    try:
        return call()
    except XComMismatchError as err:
        raise AirflowFailException(str(err)) from err


def run_prefix(config: TrainiumConfig, *parts: str, run_id: str | None = None) -> str:
    """``<artifact root>/<parts...>[/<run key>]``: where one run's artifacts live (run key: safe and unique)."""
    from airflow_provider_trainium.compute.naming import run_key

    tail = [run_key(run_id)] if run_id is not None else []
    return "/".join([config.artifact_root.rstrip("/"), *parts, *tail])


def stage_uris(prefix: str) -> dict[str, str]:
    """The URIs of a training run's stages under ``prefix``: data, checkpoints, model, evaluation."""
    return {
        "data_uri": f"{prefix}/data",
        "checkpoint_uri": f"{prefix}/checkpoints",
        "model_uri": f"{prefix}/model",
        "eval_uri": f"{prefix}/evaluation",
    }


def read_evaluation(context: Mapping[str, Any], evaluation_task_id: str = "evaluate") -> dict[str, Any]:
    """The evaluation job's ``evaluation.json`` (its numbers, for the log) under its output location derived for
    this run, read with the connection's credentials."""
    from airflow_provider_trainium import artifacts
    from airflow_provider_trainium.operators.run_outputs import task_output_uri

    where = fail_on_mismatch(lambda: task_output_uri(context, evaluation_task_id))
    return artifacts.read_json(f"{where.rstrip('/')}/{boundary.EVALUATION_FILE}")


@overload
def resolve_model(
    ref: str, *, missing_ok: Literal[False] = False, trainium_conn_id: str = DEFAULT_CONN_ID
) -> ModelVersion: ...
@overload
def resolve_model(ref: str, *, missing_ok: bool, trainium_conn_id: str = DEFAULT_CONN_ID) -> ModelVersion | None: ...
def resolve_model(
    ref: str, *, missing_ok: bool = False, trainium_conn_id: str = DEFAULT_CONN_ID
) -> ModelVersion | None:
    """A registered model version (``name@alias`` or ``name:version``), checked against its manifest.

    Raises the registry's ``NotFoundError`` (or returns None with ``missing_ok``) and ``IntegrityError``.
    """
    from airflow_provider_trainium.registry import NotFoundError
    from airflow_provider_trainium.registry.config import open_registry

    try:
        return open_registry(trainium_conn_id=trainium_conn_id).resolve(ref)
    except NotFoundError:
        if missing_ok:
            return None
        raise


def is_manual_run(context: Mapping[str, Any]) -> bool:
    """Whether a person triggered this run directly (not the scheduler or a backfill)."""
    run_type = str(getattr(context["dag_run"], "run_type", "")).rsplit(".", 1)[-1].lower()
    return run_type == "manual"
