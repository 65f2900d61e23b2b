"""A registered version's lineage names the image this run built and the base that image started from."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG

from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator
from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator
from airflow_provider_trainium.registry import ModelRegistry
from tests.integration.registry.conftest import run_dag

START = datetime(2026, 11, 1)
IMAGE = "127.0.0.1:5000/trainium/train@sha256:" + "ab" * 32
BASE = "sha256:" + "cd" * 32


class FoundImage(TrainiumImageBuildOperator):
    """The operator's XComs for an image already in the registry (the image tests cover finding it)."""

    def __init__(self, *, base_digest: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_digest = base_digest

    def execute(self, context: Any) -> str:
        context["ti"].xcom_push(key="base_digest", value=self.base_digest)
        return IMAGE

    def derived_image(self) -> tuple[str, str | None, dict[str, str] | None]:
        """What the registry holds under this run's content-hash tag (its labels carry the base digest)."""
        return IMAGE, self.base_digest, None


def register(tmp_path: Path, dag_id: str, base_digest: str | None, with_image: bool) -> dict[str, Any]:
    source = tmp_path / dag_id
    source.mkdir()
    (source / "model.safetensors").write_bytes(dag_id.encode() * 16)
    (source / "metrics.json").write_text('{"accuracy": 0.9}')
    root = (tmp_path / "root").as_uri()
    with DAG(dag_id, schedule=None, start_date=START) as dag:
        reg = TrainiumRegisterModelOperator(task_id="register", model_name=dag_id, source_uri=str(source),
                                            artifact_root=root, require_evaluation=False)  # fmt: skip
        if with_image:
            FoundImage(task_id="image", base_digest=base_digest, repository="127.0.0.1:5000/trainium/train") >> reg
    run = run_dag(dag)
    assert {ti.task_id: ti.state for ti in run.get_task_instances()}["register"] == "success"
    return ModelRegistry(root).get_version(dag_id, 1).manifest["source"]


def test_the_built_image_and_its_base_digest_are_recorded(tmp_path: Path) -> None:
    source = register(tmp_path, "lineage_image", BASE, with_image=True)
    assert (source["image"], source["base_digest"]) == (IMAGE, BASE)
    assert source["task_id"] == "register"


def test_an_unknown_base_is_null_and_a_run_without_an_image_records_none(tmp_path: Path) -> None:
    unknown = register(tmp_path, "lineage_unknown_base", None, with_image=True)
    assert unknown["image"] == IMAGE and unknown["base_digest"] is None
    plain = register(tmp_path, "lineage_no_image", None, with_image=False)
    assert "image" not in plain and "base_digest" not in plain
