"""A preflight check's result: one of three statuses, and the verdict of its findings."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.preflight.result import CheckResult, verdict


def test_a_status_outside_the_three_is_refused():
    with pytest.raises(ValueError, match="'fine' is not one of ok, warning, error"):
        CheckResult("image", "fine", "")  # type: ignore[arg-type]


def test_verdict_is_the_worst_finding():
    assert verdict("x", "fine", ["a", "b"], ["c"]) == CheckResult("x", "error", "a; b")
    assert verdict("x", "fine", [], ["c"]) == CheckResult("x", "warning", "c")
    assert verdict("x", "fine") == CheckResult("x", "ok", "fine")
