"""Find or build: the image for a context exists once per registry, whoever asks first builds it."""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass

from airflow_provider_trainium.image.builders.base import BASE_DIGEST_LABEL, Builder, BuildOutput, BuildRequest
from airflow_provider_trainium.image.container_registry import ContainerRegistry
from airflow_provider_trainium.image.context import BuildContext
from airflow_provider_trainium.image.dockerfile import base_image
from airflow_provider_trainium.image.errors import BuildFailed

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImageResult:
    """Where the image is: pass ``reference`` (pinned by digest) to training tasks, never the tag.

    ``base_digest`` is the manifest digest of the image the build started from (its
    ``org.opencontainers.image.base.digest`` label); None when it is not known.
    """

    repository: str
    tag: str
    digest: str
    built: bool
    context_digest: str
    seconds: float
    base_digest: str | None = None

    @property
    def reference(self) -> str:
        return f"{self.repository}@{self.digest}"

    @property
    def tagged(self) -> str:
        return f"{self.repository}:{self.tag}"


def ensure_image(
    context: BuildContext,
    registry: ContainerRegistry,
    builder: Builder,
    *,
    tag_prefix: str = "ctx",
) -> ImageResult:
    """Return the registry's digest for this context's tag, building and pushing only if it is missing.

    The registry is asked first, so an unreachable registry or a missing repository fails before any
    build starts; after a build the registry is asked again, so the digest returned is what it stores.
    """
    started = time.monotonic()
    tag = context.tag(tag_prefix)
    repository = registry.repository
    existing = registry.lookup(tag)
    if existing:
        log.info("image %s:%s already in the registry (%s); not building", repository, tag, existing)
        base = (registry.labels(tag) or {}).get(BASE_DIGEST_LABEL)
        return ImageResult(repository, tag, existing, False, context.digest, time.monotonic() - started, base)

    image = f"{repository}:{tag}"
    log.info("building %s with %s (%d context entries)", image, builder.name, len(context.entries))
    with tempfile.TemporaryDirectory(prefix="trainium-context-") as tmp:
        staged = context.stage(tmp)
        dockerfile = (staged.directory / staged.dockerfile).read_text(encoding="utf-8")
        request = BuildRequest(
            context=staged,
            image=image,
            context_digest=context.digest,
            build_args=dict(context.build_args),
            target=context.target,
            auths=tuple(registry.auths()),
            insecure_registry=registry.insecure,
            base_image=base_image(dockerfile, dict(context.build_args), context.target),
        )
        output = builder.build(request)
    if not isinstance(output, BuildOutput):  # a builder that reports only the pushed digest
        output = BuildOutput(output)
    reported = output.digest
    digest = registry.lookup(tag)
    if not digest:
        raise BuildFailed(f"{builder.name} reported success but {image} is not in the registry")
    if reported and reported != digest:
        log.warning(
            "builder reported %s but the registry holds %s for %s; using the registry's",
            reported,
            digest,
            image,
        )
    base = output.base_digest
    if base is None and request.base_image:
        base = (registry.labels(tag) or {}).get(BASE_DIGEST_LABEL)
    elapsed = time.monotonic() - started
    log.info("pushed %s@%s in %.1f s (base %s@%s)", repository, digest, elapsed, request.base_image, base)
    return ImageResult(repository, tag, digest, True, context.digest, elapsed, base)
