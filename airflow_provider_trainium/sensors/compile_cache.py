"""``NeuronCompileCacheSensor``: wait until a compilation with a given cache key is in the cache.

A training DAG that shares a cache with a separate compile DAG waits here instead of compiling itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue


class NeuronCompileCacheSensor(BaseSensorOperator):
    """Succeeds once ``<compile_cache_uri>/keys/<cache_key>.json`` exists; returns that record.

    :param compile_cache_uri: the cache (``s3://`` or ``file://``). Templated.
    :param cache_key: the key ``NeuronCompileOperator`` returns (``cache_key``). Templated.
    :param aws_conn_id: AWS connection for ``s3://`` caches.
    """

    template_fields: Sequence[str] = ("compile_cache_uri", "cache_key")

    def __init__(self, *, compile_cache_uri: str, cache_key: str, aws_conn_id: str | None = None, **kwargs: Any):
        kwargs.setdefault("mode", "reschedule")
        super().__init__(**kwargs)
        self.compile_cache_uri = compile_cache_uri
        self.cache_key = cache_key
        self.aws_conn_id = aws_conn_id

    def poke(self, context: Context) -> PokeReturnValue:
        from airflow_provider_trainium.operators.compile import read_key_record

        record = read_key_record(self.compile_cache_uri, self.cache_key, self.aws_conn_id)
        if record is None:
            self.log.info("no compilation for key %s in %s yet", self.cache_key, self.compile_cache_uri)
        return PokeReturnValue(is_done=record is not None, xcom_value=record)
