"""Where the files a deployment needs beside the provider are: the DAGs, the training images' build context
and the CloudFormation templates.

An installed wheel carries them under ``airflow_provider_trainium/bundled/`` (``setup.py`` copies them there); a
checkout, installed editable, has them at the repository root. Both hold the same tree, so an image built from an
installed provider gets the content-hash tag of one built from the checkout it came from.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
BUNDLED = PACKAGE / "bundled"


class DeploymentFilesMissing(FileNotFoundError):
    """Neither the wheel's bundled files nor a checkout are beside this provider."""


def root() -> Path:
    """The folder holding ``dags/``, ``docker/``, ``trainium_trainer/`` and ``cloudformation/``."""
    if (BUNDLED / "docker" / "Dockerfile").is_file():
        return BUNDLED
    checkout = PACKAGE.parent
    if (checkout / "docker" / "Dockerfile").is_file() and (checkout / "pyproject.toml").is_file():
        return checkout
    raise DeploymentFilesMissing(
        f"no DAGs, Dockerfiles or templates beside {PACKAGE}: install the provider from its wheel or sdist "
        "(they carry them), or from a checkout of its repository"
    )


def dags_folder() -> Path:
    """The shipped DAG files (``airflow trainium dags install`` copies them into a DAGs folder)."""
    return root() / "dags"


def image_context() -> Path:
    """The build context of the training images (``docker/Dockerfile``, ``docker/native/Dockerfile``)."""
    return root()


def templates_folder() -> Path:
    """The CloudFormation templates (``base.yaml``, ``ecs.yaml``, ``batch.yaml``)."""
    return root() / "cloudformation"
