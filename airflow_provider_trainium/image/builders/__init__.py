"""Builders behind one interface: ``docker`` (engine), ``buildah`` (daemonless), ``codebuild`` (AWS)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from airflow_provider_trainium.image.builders.base import Builder, BuildRequest, LogTail
from airflow_provider_trainium.image.errors import BuilderUnavailable

BUILDERS = ("docker", "buildah", "codebuild")

__all__ = ["BUILDERS", "Builder", "BuildRequest", "LogTail", "auto_builder_name", "make_builder"]


def _docker_engine_present() -> bool:
    host = os.environ.get("DOCKER_HOST", "")
    if host:
        return True
    return Path("/var/run/docker.sock").exists()


def auto_builder_name(aws_configured: bool) -> str:
    """A Docker engine if one is here, else buildah if installed, else CodeBuild when AWS is configured."""
    if _docker_engine_present():
        return "docker"
    if shutil.which("buildah"):
        return "buildah"
    if aws_configured:
        return "codebuild"
    raise BuilderUnavailable(
        "no image builder on this worker: no Docker engine, no buildah, and no trainium connection for "
        "CodeBuild; install buildah or pass builder='codebuild' with codebuild_source_uri"
    )


def make_builder(name: str, **options: Any) -> Builder:
    """Instantiate a builder by name with its own keyword options."""
    if name == "docker":
        from airflow_provider_trainium.image.builders.docker_engine import DockerEngineBuilder

        return DockerEngineBuilder(**options)
    if name == "buildah":
        from airflow_provider_trainium.image.builders.buildah import BuildahBuilder

        return BuildahBuilder(**options)
    if name == "codebuild":
        from airflow_provider_trainium.image.builders.codebuild import CodeBuildBuilder

        return CodeBuildBuilder(**options)
    raise BuilderUnavailable(f"unknown builder {name!r}; choose one of {', '.join(BUILDERS)} or 'auto'")
