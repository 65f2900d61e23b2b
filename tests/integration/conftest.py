"""Fixtures of the integration tests (moto server, dag.test()); the moto server itself is in tests/conftest.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests


@pytest.fixture
def moto_requests(
    moto_reset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """Every request the moto server receives from now on, read through moto's recorder API.

    The recorder appends to ``moto_recording`` in the server's working directory: the test's own tmp_path.
    """
    monkeypatch.chdir(tmp_path)
    requests.post(f"{moto_reset}/moto-api/recorder/reset-recording", timeout=10).raise_for_status()
    requests.post(f"{moto_reset}/moto-api/recorder/start-recording", timeout=10).raise_for_status()

    def recorded() -> list[dict[str, Any]]:
        response = requests.get(f"{moto_reset}/moto-api/recorder/download-recording", timeout=10)
        response.raise_for_status()
        return [json.loads(line) for line in response.text.splitlines() if line.strip()]

    yield recorded
    requests.post(f"{moto_reset}/moto-api/recorder/stop-recording", timeout=10).raise_for_status()


def calls(recorded: list[dict[str, Any]], *, path: str | None = None, target: str | None = None) -> int:
    """How many recorded requests went to a REST ``path`` (Batch) or a JSON ``X-Amz-Target`` action (ECS)."""
    count = 0
    for entry in recorded:
        url = str(entry.get("url", ""))
        headers = {k.lower(): v for k, v in (entry.get("headers") or {}).items()}
        if (path and url.split("?")[0].endswith(path)) or (target and headers.get("x-amz-target", "").endswith(target)):
            count += 1
    return count
