"""Without ``context_dir`` the image operator builds from the context the provider ships, wherever it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_trainium.deployment_files import image_context
from airflow_provider_trainium.image.errors import ContextError
from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator


def test_the_shipped_context_is_the_default_and_holds_both_dockerfiles():
    operator = TrainiumImageBuildOperator(task_id="image")
    root = Path(operator.build_context_dir())
    assert root == image_context()
    assert (root / operator.dockerfile_path("xla")).is_file()
    assert (root / operator.dockerfile_path("native")).is_file()


def test_a_users_image_must_name_its_own_folder():
    operator = TrainiumImageBuildOperator(task_id="user_image", base_image="trainium")
    with pytest.raises(ContextError, match="needs context_dir"):
        operator.build_context_dir()


def test_a_given_folder_wins(tmp_path):
    assert TrainiumImageBuildOperator(task_id="image", context_dir=str(tmp_path)).build_context_dir() == str(tmp_path)
