"""The wheel carries what a deployment needs beside the provider, and nothing a deployment must not carry."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from airflow_provider_trainium.image.context import BuildContext
from airflow_provider_trainium.image.stacks import dockerfile_for

REPO = Path(__file__).resolve().parents[3]
BUNDLED = "airflow_provider_trainium/bundled/"


@pytest.fixture(scope="module")
def names(wheel) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_dags_dockerfiles_and_templates_are_inside(names):
    shipped = {name.removeprefix(BUNDLED) for name in names if name.startswith(BUNDLED)}
    expected = {path.relative_to(REPO).as_posix() for path in (REPO / "dags").glob("*.py")}
    expected |= {"docker/Dockerfile", "docker/native/Dockerfile", ".dockerignore", "docker/requirements.txt"}
    expected |= {f"cloudformation/{name}" for name in ("base.yaml", "ecs.yaml", "batch.yaml")}
    assert expected <= shipped
    assert not [name for name in shipped if "__pycache__" in name or name.endswith(".pyc")]
    assert "cloudformation/checkov.lock" not in shipped


def test_the_in_container_package_has_a_name_of_its_own(names):
    top_level = {name.split("/", 1)[0] for name in names if not name.split("/", 1)[0].endswith(".dist-info")}
    assert top_level == {"airflow_provider_trainium", "trainium_trainer"}
    assert "trainium_trainer/launch.py" in names


def test_the_dev_server_stays_out(names):
    assert not [name for name in names if "devserver" in name]
    assert "airflow_provider_trainium/plugins/host_check_plugin.py" in names  # the Host allowlist is a feature


@pytest.mark.parametrize("stack", ["xla", "native"])
def test_an_installed_provider_builds_the_image_tag_a_checkout_builds(wheel, tmp_path, stack):
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path)
    installed = BuildContext.load(tmp_path / BUNDLED, dockerfile_for(stack))
    checkout = BuildContext.load(REPO, dockerfile_for(stack))
    assert [e.path for e in installed.entries] == [e.path for e in checkout.entries]
    assert installed.tag() == checkout.tag()
