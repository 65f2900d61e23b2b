"""Which image a build starts from: the builders pull exactly this one and label the image with its digest."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_trainium.image.dockerfile import base_image

REPO = Path(__file__).resolve().parents[3]

MULTI_STAGE = """\
ARG BASE=python:3.12-slim
ARG TOOLS=busybox:1.36
FROM ${TOOLS} AS tools
FROM $BASE AS builder
RUN true
FROM builder AS final
COPY --from=tools /bin/busybox /bin/busybox
FROM scratch AS empty
"""


def test_the_real_dockerfile_starts_from_its_base_image_arg() -> None:
    text = (REPO / "docker/Dockerfile").read_text()
    default = next(line for line in text.splitlines() if line.startswith("ARG BASE_IMAGE="))
    assert base_image(text) == default.partition("=")[2]
    assert base_image(text, {"BASE_IMAGE": "127.0.0.1:5000/base:1"}) == "127.0.0.1:5000/base:1"


@pytest.mark.parametrize(
    ("target", "build_args", "expected"),
    [
        ("final", {}, "python:3.12-slim"),  # a stage built FROM another stage starts from that stage's base
        ("builder", {"BASE": "debian:12"}, "debian:12"),
        ("tools", {}, "busybox:1.36"),
        ("empty", {}, None),  # scratch: nothing to pull, no digest
        (None, {}, None),  # the last stage is the default target
        ("missing", {}, None),  # unknown stage: the build itself reports it
    ],
)
def test_stages_and_args(target: str | None, build_args: dict[str, str], expected: str | None) -> None:
    assert base_image(MULTI_STAGE, build_args, target) == expected


def test_platform_flag_and_arg_inside_a_stage() -> None:
    text = "ARG IMG=alpine:3\nFROM --platform=linux/amd64 ${IMG}\nARG IMG=ignored:1\n"
    assert base_image(text) == "alpine:3"
