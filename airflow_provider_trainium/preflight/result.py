"""One preflight check's verdict: what a first run depends on, and why it is or is not ready."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "warning", "error"]
STATUSES: tuple[Status, ...] = ("ok", "warning", "error")


@dataclass(frozen=True)
class CheckResult:
    """``name`` is stable (scripts and the DAGs' first task match on it); ``reason`` says why, for a person.
    ``transient``: an error because AWS did not answer (throttled, 5xx), not because of what it answered."""

    name: str
    status: Status
    reason: str
    transient: bool = False

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check {self.name!r}: status {self.status!r} is not one of {', '.join(STATUSES)}")

    def to_dict(self) -> dict[str, str]:
        """What the command prints: a transient error's reason already says AWS did not answer."""
        return {"name": self.name, "status": self.status, "reason": self.reason}


def ok(name: str, reason: str) -> CheckResult:
    return CheckResult(name, "ok", reason)


def warning(name: str, reason: str) -> CheckResult:
    return CheckResult(name, "warning", reason)


def error(name: str, reason: str, *, transient: bool = False) -> CheckResult:
    return CheckResult(name, "error", reason, transient)


def verdict(name: str, ok_reason: str, errors: Iterable[str] = (), warnings: Iterable[str] = ()) -> CheckResult:
    """One result for a check of several findings: error if any, else warning if any, else ok."""
    bad, doubtful = list(errors), list(warnings)
    if bad:
        return error(name, "; ".join(bad))
    if doubtful:
        return warning(name, "; ".join(doubtful))
    return ok(name, ok_reason)


def errors(results: Iterable[CheckResult]) -> list[CheckResult]:
    """The results that stop a run (a non-empty list makes ``airflow trainium preflight`` exit 1)."""
    return [r for r in results if r.status == "error"]
