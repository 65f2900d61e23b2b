"""Errors of the image pipeline, each saying what went wrong and where to look."""

from __future__ import annotations


class ImageError(Exception):
    """Base class: anything that stops an image from being found or built."""


class ContextError(ImageError):
    """The build context is unusable (missing Dockerfile, unreadable or unsupported file, bad COPY)."""


class ContainerRegistryError(ImageError):
    """The registry answered, but not with something we can use (auth, missing repository)."""


class ContainerRegistryUnreachable(ContainerRegistryError):
    """The registry did not answer; raised before any build starts."""


class BuilderUnavailable(ImageError):
    """The chosen builder cannot run on this worker (no engine, no binary, no configuration)."""


class BuildFailed(ImageError):
    """A build or push failed; carries the last lines of its log."""

    def __init__(self, message: str, log_tail: list[str] | tuple[str, ...] = ()) -> None:
        self.log_tail = list(log_tail)
        text = message
        if self.log_tail:
            text += "\n--- last lines of the build log ---\n" + "\n".join(self.log_tail)
        super().__init__(text)
