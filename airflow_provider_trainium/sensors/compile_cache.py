"""``TrainiumCompileCacheSensor``: wait until a compilation with a given cache key is in the cache.

A training DAG that shares a cache with a separate compile DAG waits here instead of compiling itself. The key record
lies in the cache, which every job may write: the sensor waits until the cache's manifest, which only Airflow writes
(``compile_manifest``), names the key too. The training task checks the entries themselves before its job starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue

from airflow_provider_trainium import artifacts, deprecated_names
from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID
from airflow_provider_trainium.neuron.compile_key import key_record_uri


class TrainiumCompileCacheSensor(BaseSensorOperator):
    """Succeeds once ``<compile_cache_uri>/keys/<cache_key>.json`` exists and the cache's manifest names the key;
    returns the record.

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
            return PokeReturnValue(is_done=False)
        if not self.manifest_names_key():
            self.log.info("key %s is recorded in %s, but no manifest of the cache names it yet (a compile task writes "
                          "it)", self.cache_key, self.compile_cache_uri)  # fmt: skip
            return PokeReturnValue(is_done=False)
        return PokeReturnValue(is_done=True, xcom_value=record)

    def manifest_names_key(self) -> bool:
        from airflow_provider_trainium import compile_manifest
        from airflow_provider_trainium.hooks.trainium import TrainiumHook

        config = TrainiumHook(self.trainium_conn_id).get_config()
        conn = self.aws_conn_id or config.aws_conn_id
        manifest = compile_manifest.read_manifest(config.artifact_root, self.compile_cache_uri, conn)
        return manifest is not None and self.cache_key in (manifest.get("keys") or {})


def __getattr__(name: str) -> Any:
    """The former class names (:mod:`airflow_provider_trainium.deprecated_names`)."""
    return deprecated_names.resolve(__name__, name)
