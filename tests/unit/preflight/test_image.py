"""A preflight rule that needs no AWS: how an image reference is read."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.preflight.image import ImageRef, parse_image

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("image", "ref"),
    [
        (f"host:5000/team/train@{DIGEST}", ImageRef("host:5000/team/train", digest=DIGEST)),
        ("host:5000/team/train:v1", ImageRef("host:5000/team/train", tag="v1")),
        ("host:5000/team/train", ImageRef("host:5000/team/train", tag="latest")),
    ],
)
def test_parse_image(image, ref):
    assert parse_image(image) == ref
