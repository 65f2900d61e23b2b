"""NeuronImageBuildOperator in real DAG runs: XCom outputs, second run served from the registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.image.builders.buildah import BuildahBuilder
from airflow_provider_trainium.operators.image import NeuronImageBuildOperator
from tests.image.conftest import CountingBuilder, LocalRegistry, write_tree

DAG_FILE = """\
import datetime as dt
import json
import os

from airflow.sdk import DAG

from airflow_provider_trainium.operators.image import NeuronImageBuildOperator

with DAG(os.environ["IMAGE_TEST_DAG_ID"], schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
    NeuronImageBuildOperator(task_id="image", **json.loads(os.environ["IMAGE_TEST_KWARGS"]))
"""


def run_once(
    monkeypatch: pytest.MonkeyPatch, folder: Path, dag_id: str, builder: Any, **kwargs: Any
) -> dict[str, Any]:
    """One dag.test() run of a DAG file holding only the operator; returns its state and XComs.

    dag.test() needs the DAG in a bundle, so the DAG lives in a file of a temporary bundle; the
    in-memory task then gets the counting builder (dag.test runs the task objects it was called on).
    """
    import importlib.util
    import json

    folder.mkdir(exist_ok=True)
    path = folder / f"{dag_id}.py"
    path.write_text(DAG_FILE)
    bundle = {
        "name": "image-tests",
        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
        "kwargs": {"path": str(folder), "refresh_interval": 0},
    }
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps([bundle]))
    monkeypatch.setenv("IMAGE_TEST_DAG_ID", dag_id)
    monkeypatch.setenv("IMAGE_TEST_KWARGS", json.dumps(kwargs))
    spec = importlib.util.spec_from_file_location(f"image_test_{dag_id}", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    dag = module.dag
    dag.task_dict["image"].builder = builder
    run = dag.test()
    ti = run.get_task_instance("image")
    return {
        "state": str(ti.state),
        "image": ti.xcom_pull(task_ids="image"),
        **{key: ti.xcom_pull(task_ids="image", key=key) for key in ("tag", "digest", "built")},
    }


@pytest.mark.slow
def test_operator_builds_then_reuses(
    local_registry: LocalRegistry,
    buildah_options: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = write_tree(
        tmp_path / "repo",
        {
            "docker/Dockerfile": "FROM scratch\nARG SOURCE_REVISION\nCOPY trainer/ /opt/trainer/\n"
            'LABEL org.opencontainers.image.revision="${SOURCE_REVISION}"\n',
            "trainer/__init__.py": "",
            "trainer/launch.py": "print('launch')\n",
        },
    )
    builder = CountingBuilder(BuildahBuilder(**buildah_options))
    kwargs: dict[str, Any] = dict(
        context_dir=str(app),
        repository=local_registry.repository("trainium/operator"),
        insecure_registry=True,
        source_revision="0123abc",
    )
    dags = tmp_path / "dags"
    first = run_once(monkeypatch, dags, "image_build_first", builder, **kwargs)
    assert first["state"] == "success", first
    assert first["built"] is True and builder.calls == 1
    assert first["image"] == f"{local_registry.host}/trainium/operator@{first['digest']}"
    assert first["tag"].startswith("ctx-")

    second = run_once(monkeypatch, dags, "image_build_second", builder, **kwargs)
    assert second["state"] == "success"
    assert builder.calls == 1 and second["built"] is False
    assert (second["image"], second["tag"]) == (first["image"], first["tag"])

    # A new revision is a build arg, so it is a new tag (and a build).
    third = run_once(
        monkeypatch, dags, "image_build_third", builder, **{**kwargs, "source_revision": "4567def"}
    )
    assert builder.calls == 2 and third["tag"] != first["tag"] and third["built"] is True


def test_bad_context_fails_the_task_before_any_registry_call(tmp_path: Path) -> None:
    from airflow_provider_trainium.image.errors import ContextError

    operator = NeuronImageBuildOperator(
        task_id="image", context_dir=str(tmp_path), repository="127.0.0.1:1/never/contacted"
    )
    with pytest.raises(ContextError, match="Dockerfile not found"):
        operator.execute(context={})  # type: ignore[arg-type]


def test_no_repository_anywhere_is_a_clear_error(tmp_path: Path) -> None:
    from airflow_provider_trainium.image.errors import RegistryError

    write_tree(tmp_path, {"docker/Dockerfile": "FROM scratch\n"})
    operator = NeuronImageBuildOperator(task_id="image", context_dir=str(tmp_path))
    with pytest.raises(RegistryError, match="no image repository"):
        operator.execute(context={})  # type: ignore[arg-type]
