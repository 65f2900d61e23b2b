"""``TrainiumCompileCacheSensor``: wait until a compilation with a given cache key is in the cache.

A training DAG that shares a cache with a separate compile DAG waits here instead of compiling itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue

from airflow_provider_trainium import artifacts, deprecated_names
from airflow_provider_trainium.hooks.trainium import DEFAULT_CONN_ID
from airflow_provider_trainium.neuron.compile_key import key_record_uri


class TrainiumCompileCacheSensor(BaseSensorOperator):
    """Succeeds once ``<compile_cache_uri>/keys/<cache_key>.json`` exists; returns that record.

    :param compile_cache_uri: the cache (``s3://`` or ``file://``). Templated.
    :param cache_key: the key ``TrainiumCompileOperator`` returns (``cache_key``). Templated.
    :param aws_conn_id: AWS connection for ``s3://`` caches; default: the trainium connection's.
    :param trainium_conn_id: the ``trainium`` connection whose ``aws_conn_id`` reads ``s3://`` caches.
    """

    template_fields: Sequence[str] = ("compile_cache_uri", "cache_key")

    def __init__(
        self,
        *,
        compile_cache_uri: str,
        cache_key: str,
        aws_conn_id: str | None = None,
        trainium_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("mode", "reschedule")
        super().__init__(**kwargs)
        self.compile_cache_uri = compile_cache_uri
        self.cache_key = cache_key
        self.aws_conn_id = aws_conn_id
        self.trainium_conn_id = trainium_conn_id

    def poke(self, context: Context) -> PokeReturnValue:
        record = artifacts.read_json(
            key_record_uri(self.compile_cache_uri, self.cache_key),
            missing_ok=True,
            aws_conn_id=self.aws_conn_id,
            trainium_conn_id=self.trainium_conn_id,
        )
        if record is None:
            self.log.info("no compilation for key %s in %s yet", self.cache_key, self.compile_cache_uri)
        return PokeReturnValue(is_done=record is not None, xcom_value=record)


def __getattr__(name: str) -> Any:
    """The former class names (:mod:`airflow_provider_trainium.deprecated_names`)."""
    return deprecated_names.resolve(__name__, name)
