"""The short soak CI runs: ``benchmarks.soak`` as ``make soak`` runs it, with few jobs.

A handful of deferred jobs, half on Batch and half on ECS, through the whole deployment, behind the fault proxy
(5% of calls throttled, failed, reset or slow), while the triggerer is killed and restarted: every count of the
table must be at its goal (one SubmitJob per Batch job and one RunTask per ECS job, nothing lost or stuck, no
repeated or missing log line). The scheduler kill and the PostgreSQL outage have their own e2e tests
(``test_restarts.py``); ``make soak`` is the long version with all of them (200 jobs, two triggerer restarts, a
scheduler restart, a 20 s outage).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.soak import REPO

pytestmark = pytest.mark.slow

SHORT = ["--jobs", "4", "--minutes", "6", "--triggerer-restarts", "1", "--scheduler-restarts", "0",
         "--pg-outage", "0"]  # fmt: skip


def test_a_short_soak_ends_with_every_count_at_its_goal() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.soak", *SHORT], cwd=REPO, capture_output=True,
                          text=True, timeout=1200)  # fmt: skip
    table = done.stdout[done.stdout.find("measured") :]
    assert done.returncode == 0, f"{table}\n{done.stderr[-3000:]}"
    rows = dict(line.split("  ", 1) for line in table.splitlines()[1:] if "  " in line)
    assert rows["SubmitJob calls per Batch job"].split()[0] == "1.00", table
    assert rows["RunTask calls per ECS job"].split()[0] == "1.00", table
    assert rows["jobs started in AWS"].split()[:2] == ["4", "(0"], table
    for row in ("jobs lost", "jobs stuck"):
        assert rows[row].split()[0] == "0", table
    for row in ("repeated log lines", "missing log lines"):
        assert rows[row].strip().startswith("0 of "), table
    events = table.splitlines()[-1]
    assert "triggerer killed and restarted" in events and "failed" not in events, table
    assert not rows["faults injected"].strip().startswith("0 "), table  # the proxy did inject faults
