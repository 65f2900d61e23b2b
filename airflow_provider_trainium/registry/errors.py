"""The model registry's errors: one hierarchy under ``RegistryError``, so callers can catch it whole."""

from __future__ import annotations


class RegistryError(RuntimeError):
    """The model registry refused an operation; the message says why."""


class InvalidNameError(RegistryError, ValueError):
    """A model name, alias or reference that the registry refuses before touching storage."""


class NotFoundError(RegistryError, LookupError):
    """A model, version or alias that does not exist (for readers: no manifest means no version)."""


class IntegrityError(RegistryError):
    """A version's files no longer match the sha256 its manifest records: it must not be used."""


class SourceChangedError(RegistryError):
    """The source files changed between hashing and upload; registering would record wrong checksums."""
