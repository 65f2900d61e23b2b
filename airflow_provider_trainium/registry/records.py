"""What the registry hands back: a version, the outcome of a registration, an alias move, an integrity report.

Plain frozen values, apart from the code that reads and writes the store, so that a caller (an operator, a DAG
task, the CLI) can name them without loading that code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModelVersion:
    """A published version: its manifest and where its files are."""

    name: str
    version: int
    uri: str
    manifest_uri: str
    manifest: dict[str, Any]

    @property
    def metrics(self) -> dict[str, Any]:
        return self.manifest.get("metrics") or {}


@dataclass(frozen=True)
class RegisterResult:
    version: ModelVersion
    created: bool

    def to_xcom(self) -> dict[str, Any]:
        return {
            "name": self.version.name,
            "version": self.version.version,
            "uri": self.version.uri,
            "manifest_uri": self.version.manifest_uri,
            "created": self.created,
        }


@dataclass(frozen=True)
class AliasState:
    """One alias move (also the alias's current state: the latest move)."""

    name: str
    alias: str
    version: int
    revision: int
    previous_version: int | None
    moved_at: str
    moved_by: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AliasState:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class VerifyReport:
    name: str
    version: int
    checked: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems
