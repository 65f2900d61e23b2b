"""TrainiumImageBuildOperator in real DAG runs: XCom outputs, second run served from the registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.image.builders.buildah import BuildahBuilder
from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator
from tests.conftest import set_trainium_connection
from tests.dag_files import import_dag_file
from tests.integration.image.conftest import CountingBuilder, LocalRegistry, write_tree

DAG_FILE = """\
import datetime as dt
import json
import os

from airflow.sdk import DAG

from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator

with DAG(os.environ["IMAGE_TEST_DAG_ID"], schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
    TrainiumImageBuildOperator(task_id="image", **json.loads(os.environ["IMAGE_TEST_KWARGS"]))
"""


def run_once(monkeypatch: pytest.MonkeyPatch, folder: Path, dag_id: str, builder: Any, **kwargs: Any) -> dict[str, Any]:
    """One dag.test() run of a DAG file holding only the operator; returns its state and XComs.

    dag.test() needs the DAG in a bundle, so the DAG lives in a file of a temporary bundle; the
    in-memory task then gets the counting builder (dag.test runs the task objects it was called on).
    """
    import json

    monkeypatch.setenv("IMAGE_TEST_DAG_ID", dag_id)
    monkeypatch.setenv("IMAGE_TEST_KWARGS", json.dumps(kwargs))
    dag = import_dag_file(folder, dag_id, DAG_FILE, "image-tests", monkeypatch, module=f"image_test_{dag_id}").dag
    if builder is not None:
        dag.task_dict["image"].builder = builder
    run = dag.test()
    ti = run.get_task_instance("image")
    return {
        "state": str(ti.state),
        "image": ti.xcom_pull(task_ids="image"),
        **{key: ti.xcom_pull(task_ids="image", key=key) for key in ("tag", "digest", "built", "base_digest")},
        "link": ti.xcom_pull(task_ids="image", key="trainium_links"),
    }


def push_base(registry: LocalRegistry, buildah_options: dict[str, str], tmp_path: Path) -> tuple[str, str]:
    """A one-file base image pushed to the local registry: its name there and the digest the registry holds."""
    import subprocess

    buildah = ["buildah", "--storage-driver", "vfs", "--root", buildah_options["root"]]
    buildah += ["--runroot", buildah_options["runroot"]]
    (tmp_path / "base.txt").write_text("base\n")
    name = registry.repository("trainium/operator-base:1")

    def run(*args: str) -> str:
        return subprocess.run([*buildah, *args], capture_output=True, text=True, check=True).stdout.strip()

    container = run("from", "scratch")
    run("copy", container, str(tmp_path / "base.txt"), "/base.txt")
    run("commit", "-q", container, "localhost/operator-base:1")
    run("rm", container)
    run("push", "--tls-verify=false", "--digestfile", str(tmp_path / "digest"), "localhost/operator-base:1",
        f"docker://{name}")  # fmt: skip
    return name, (tmp_path / "digest").read_text().strip()


@pytest.mark.slow
def test_operator_builds_then_reuses(
    local_registry: LocalRegistry,
    buildah_options: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, base_digest = push_base(local_registry, buildah_options, tmp_path)
    app = write_tree(
        tmp_path / "repo",
        {
            "docker/Dockerfile": f"ARG BASE_IMAGE={base}\nFROM ${{BASE_IMAGE}}\nARG SOURCE_REVISION\n"
            'COPY trainium_trainer/ /opt/trainer/\nLABEL org.opencontainers.image.revision="${SOURCE_REVISION}"\n',
            "trainium_trainer/__init__.py": "",
            "trainium_trainer/launch.py": "print('launch')\n",
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
    assert first["base_digest"] == base_digest  # the digest of the base in the registry, as the build pulled it

    second = run_once(monkeypatch, dags, "image_build_second", builder, **kwargs)
    assert second["state"] == "success"
    assert builder.calls == 1 and second["built"] is False
    assert (second["image"], second["tag"]) == (first["image"], first["tag"])
    assert second["base_digest"] == base_digest  # read back from the found image's label

    # A new revision is a build arg, so it is a new tag (and a build).
    third = run_once(monkeypatch, dags, "image_build_third", builder, **{**kwargs, "source_revision": "4567def"})
    assert builder.calls == 2 and third["tag"] != first["tag"] and third["built"] is True


def test_bad_context_fails_the_task_before_any_registry_call(tmp_path: Path) -> None:
    from airflow_provider_trainium.image.errors import ContextError

    operator = TrainiumImageBuildOperator(
        task_id="image", context_dir=str(tmp_path), repository="127.0.0.1:1/never/contacted"
    )
    with pytest.raises(ContextError, match="Dockerfile not found"):
        operator.execute(context={})  # type: ignore[arg-type]


def test_no_repository_anywhere_is_a_clear_error(tmp_path: Path) -> None:
    from airflow_provider_trainium.image.errors import ContainerRegistryError

    write_tree(tmp_path, {"docker/Dockerfile": "FROM scratch\n"})
    operator = TrainiumImageBuildOperator(task_id="image", context_dir=str(tmp_path))
    with pytest.raises(ContainerRegistryError, match="no image repository"):
        operator.execute(context={})  # type: ignore[arg-type]


ROLE = "arn:aws:iam::123456789012:role/trainium-codebuild"


def ecr_setup(aws_conn_id: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A trainium connection pointing at moto: ECR repository, S3 artifact root, no Docker, no buildah."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    set_trainium_connection(
        monkeypatch,
        aws_conn_id=aws_conn_id,
        region_name="us-east-1",
        ecr_repository="trainium/train",
        artifact_root="s3://artifacts/trainium",
    )
    s3 = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="s3").conn
    s3.create_bucket(Bucket="artifacts")
    s3.put_bucket_versioning(Bucket="artifacts", VersioningConfiguration={"Status": "Enabled"})
    ecr = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="ecr").conn
    ecr.create_repository(repositoryName="trainium/train")
    return ecr


def test_image_already_in_ecr_is_returned_with_a_console_link(
    aws_conn_id: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import json

    from airflow_provider_trainium.image.context import BuildContext
    from airflow_provider_trainium.links.ecr import EcrImageLink

    ecr = ecr_setup(aws_conn_id, monkeypatch)
    app = write_tree(
        tmp_path / "repo",
        {"docker/Dockerfile": "FROM scratch\nCOPY trainium_trainer/ /t/\n", "trainium_trainer/a.py": ""},
    )
    tag = BuildContext.load(app, "docker/Dockerfile").tag()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "layers": [{"digest": "sha256:" + "e" * 64}],
    }
    digest = ecr.put_image(repositoryName="trainium/train", imageManifest=json.dumps(manifest), imageTag=tag)["image"][
        "imageId"
    ]["imageDigest"]
    builder = CountingBuilder(BuildahBuilder())  # present but must not be used
    out = run_once(monkeypatch, tmp_path / "dags", "image_build_ecr", builder, context_dir=str(app))
    assert out["state"] == "success" and builder.calls == 0 and out["built"] is False
    uri = ecr.describe_repositories(repositoryNames=["trainium/train"])["repositories"][0]["repositoryUri"]
    assert (out["image"], out["tag"], out["digest"]) == (f"{uri}@{digest}", tag, digest)
    assert out["base_digest"] is None  # an image config ECR does not hand out: unknown, not a failure
    link = EcrImageLink.url(out["link"])
    assert link == (
        "https://console.aws.amazon.com/ecr/repositories/private/123456789012/trainium/train/_/image/"
        f"{digest}/details?region=us-east-1"
    )


def test_codebuild_chosen_by_name_takes_its_settings_from_the_connection(
    aws_conn_id: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """moto's CodeBuild succeeds without pushing: the operator must notice the tag is still missing."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    from airflow_provider_trainium.image.context import BuildContext
    from airflow_provider_trainium.image.errors import BuildFailed

    ecr_setup(aws_conn_id, monkeypatch)
    app = write_tree(
        tmp_path / "repo",
        {"docker/Dockerfile": "FROM scratch\nCOPY trainium_trainer/ /t/\n", "trainium_trainer/a.py": ""},
    )
    operator = TrainiumImageBuildOperator(
        task_id="image", context_dir=str(app), builder="codebuild", codebuild_service_role_arn=ROLE
    )
    with pytest.raises(
        BuildFailed, match="codebuild reported success but .*trainium/train:ctx-.* is not in the registry"
    ):
        operator.execute(context={})  # type: ignore[arg-type]
    digest = BuildContext.load(app, "docker/Dockerfile").digest
    s3 = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="s3").conn
    assert s3.head_object(Bucket="artifacts", Key=f"trainium/image-contexts/{digest}.zip")["ContentLength"] > 0
    codebuild = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="codebuild").conn
    assert len(codebuild.list_builds_for_project(projectName="trainium-image-build")["ids"]) == 1


def test_auto_builder_prefers_what_the_worker_has(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_provider_trainium.image.builders import auto_builder_name, make_builder
    from airflow_provider_trainium.image.errors import BuilderUnavailable

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert auto_builder_name(aws_configured=False) == "docker"
    with pytest.raises(BuilderUnavailable, match="no Docker engine reachable"):
        make_builder("docker").build(None)  # type: ignore[arg-type]
    monkeypatch.delenv("DOCKER_HOST")
    monkeypatch.setenv("PATH", str(tmp_path))  # no buildah, no docker socket on this machine
    if not Path("/var/run/docker.sock").exists():
        assert auto_builder_name(aws_configured=True) == "codebuild"
        with pytest.raises(BuilderUnavailable, match="no image builder on this worker"):
            auto_builder_name(aws_configured=False)
    with pytest.raises(BuilderUnavailable, match="buildah executable 'buildah' not found"):
        make_builder("buildah").build(None)  # type: ignore[arg-type]
    with pytest.raises(BuilderUnavailable, match="unknown builder 'kaniko'"):
        make_builder("kaniko")
