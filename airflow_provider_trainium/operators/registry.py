"""Placeholder replaced by the registry work; lets the DAG import while it lands."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator, Context


class RegisterModelOperator(BaseOperator):
    template_fields = ("source_uri", "dataset_uri")

    def __init__(self, *, model_name: str, source_uri: str, dataset_uri: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.model_name, self.source_uri, self.dataset_uri = model_name, source_uri, dataset_uri

    def execute(self, context: Context) -> Any:
        return {"name": self.model_name, "uri": self.source_uri}
