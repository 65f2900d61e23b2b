"""The one interface every builder implements: build the staged context, push it, say the digest."""

from __future__ import annotations

import logging
import subprocess
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from airflow_provider_trainium.image.container_registry import RegistryAuth
from airflow_provider_trainium.image.context import StagedContext
from airflow_provider_trainium.image.errors import BuildFailed

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class BuildRequest:
    """Everything a builder needs; ``image`` is ``repository:tag``, ``context_digest`` names uploads."""

    context: StagedContext
    image: str
    context_digest: str
    build_args: dict[str, str] = field(default_factory=dict)
    target: str | None = None
    auths: tuple[RegistryAuth, ...] = ()
    insecure_registry: bool = False

    @property
    def registry_host(self) -> str:
        return self.image.partition("/")[0]


class Builder(Protocol):
    """Builds ``request.context`` as ``request.image`` and pushes it. Must push nothing if the build fails."""

    name: str

    def build(self, request: BuildRequest) -> str | None:
        """Build and push; return the pushed manifest digest when the builder knows it (else None)."""
        ...


class LogTail:
    """Forwards build output to the task log and keeps the last lines for the error message."""

    def __init__(self, prefix: str, lines: int = LOG_TAIL_LINES) -> None:
        self.prefix = prefix
        self.lines: deque[str] = deque(maxlen=lines)

    def __call__(self, line: str) -> None:
        line = line.rstrip()
        if line:
            self.lines.append(line)
            log.info("[%s] %s", self.prefix, line)


def run_logged(argv: Sequence[str], tail: LogTail, what: str, env: dict[str, str] | None = None) -> None:
    """Run a command, streaming its merged output into ``tail``; BuildFailed with the tail on error."""
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=env,
        )
    except OSError as exc:
        raise BuildFailed(f"{what}: cannot start {argv[0]!r}: {exc.strerror}") from None
    assert proc.stdout is not None
    with proc.stdout:
        for line in proc.stdout:
            tail(line)
    code = proc.wait()
    if code != 0:
        raise BuildFailed(f"{what} failed with exit code {code}", tuple(tail.lines))
