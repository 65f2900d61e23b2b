"""The one interface every builder implements: build the staged context, push it, say the digests."""

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
#: The label (OCI annotation key) that records which manifest of the base image a build started from. It goes
#: in at build time (``--label``), so the context tag, computed before the build, does not depend on it.
BASE_DIGEST_LABEL = "org.opencontainers.image.base.digest"


@dataclass(frozen=True)
class BuildRequest:
    """Everything a builder needs; ``image`` is ``repository:tag``, ``context_digest`` names uploads.

    ``base_image`` is the external image the built stage starts from (None for ``scratch``): the builder
    pulls it first and labels the image with its digest.
    """

    context: StagedContext
    image: str
    context_digest: str
    build_args: dict[str, str] = field(default_factory=dict)
    target: str | None = None
    auths: tuple[RegistryAuth, ...] = ()
    insecure_registry: bool = False
    base_image: str | None = None

    @property
    def registry_host(self) -> str:
        return self.image.partition("/")[0]


@dataclass(frozen=True)
class BuildOutput:
    """What a builder knows after a push: the pushed manifest digest and the base's digest (None: unknown)."""

    digest: str | None
    base_digest: str | None = None


class Builder(Protocol):
    """Builds ``request.context`` as ``request.image`` and pushes it. Must push nothing if the build fails."""

    name: str

    def build(self, request: BuildRequest) -> BuildOutput | str | None:
        """Build and push; a plain digest string (or None) is accepted from builders that know no base."""
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
