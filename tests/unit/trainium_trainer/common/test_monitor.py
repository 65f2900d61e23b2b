"""The node monitor: neuron-monitor's documented report as stream records, and the host sampler's fallback."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from trainium_trainer.common import stream
from trainium_trainer.common.monitor import HostSampler, Sampler, parse_report

SAMPLE = Path(__file__).parent / "data" / "neuron_monitor_report.json"


def test_a_documented_report_becomes_a_device_and_a_host_record() -> None:
    device, host = parse_report(json.loads(SAMPLE.read_text()), node=3, now=100.0)
    assert device == {"kind": "device", "time": 100.0, "node": 3, "neuroncores": {"0": 87.25, "1": 85.5},
                      "device_mem_used_bytes": 2 * 9663676416}  # fmt: skip
    assert host == {"kind": "host", "time": 100.0, "node": 3, "cpu_percent": 55.0,
                    "mem_used_bytes": 12884901888, "mem_total_bytes": 33285996544}  # fmt: skip


def test_missing_groups_give_nulls_not_errors() -> None:
    report = {"neuron_runtime_data": [{"pid": 1, "error": "runtime gone", "report": {}}], "system_data": {}}
    assert parse_report(report, node=0, now=1.0) == [
        {"kind": "device", "time": 1.0, "node": 0, "neuroncores": {}, "device_mem_used_bytes": None}
    ]
    assert parse_report({}, node=0, now=1.0)[0]["neuroncores"] == {}


def test_host_sampler_reads_proc(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 0 1 8 0 0 0 0 0 0\n")
    (tmp_path / "meminfo").write_text("MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\n")
    sampler = HostSampler(node=2, proc=tmp_path)
    (tmp_path / "stat").write_text("cpu  175 0 100 825 0 0 0 0 0 0\n")  # 75 busy of 100 jiffies since
    record = sampler.sample(now=5.0)
    assert record == {"kind": "host", "time": 5.0, "node": 2, "cpu_percent": 75.0, "mem_used_bytes": 600 * 1024,
                      "mem_total_bytes": 1000 * 1024}  # fmt: skip


def test_host_sampler_on_this_machine_has_the_host_schema() -> None:
    record = HostSampler(node=0).sample()
    assert 0 <= record["cpu_percent"] <= 100 and 0 < record["mem_used_bytes"] < record["mem_total_bytes"]


def _run(tmp_path: Path, samples: int) -> tuple[str, list[dict]]:
    writer = stream.StreamWriter(str(tmp_path), stream.monitor_source(1), every_s=0)
    done = threading.Event()

    def stop() -> bool:
        return len(list((tmp_path / "stream" / "monitor-node1").glob("*.jsonl"))) >= samples or done.is_set()

    timer = threading.Timer(60, done.set)  # a safety net only: the test passes as soon as the chunks exist
    timer.start()
    try:
        which = Sampler(writer, node=1, every_s=0.05, should_stop=stop).run()
    finally:
        timer.cancel()
    return which, stream.read_records(str(tmp_path), stream.monitor_source(1))


def test_without_neuron_monitor_the_host_sampler_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    which, records = _run(tmp_path / "out", samples=2)
    assert which == "host"
    assert len(records) >= 2 and {r["kind"] for r in records} == {"host"} and records[0]["node"] == 1


def test_a_job_that_ends_before_the_first_sample_still_gets_one(tmp_path: Path, monkeypatch) -> None:
    """A short single-process job ends inside the first second: its stream still shows its node."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    writer = stream.StreamWriter(str(tmp_path), stream.monitor_source(0), every_s=0)
    assert Sampler(writer, node=0, every_s=5.0, should_stop=lambda: True).run() == "host"
    (record,) = stream.read_records(str(tmp_path), stream.monitor_source(0))
    assert record["kind"] == "host" and record["node"] == 0


@pytest.mark.process
def test_neuron_monitor_reports_on_stdout_are_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in ``neuron-monitor`` on PATH that prints the documented sample once per period, as the tool does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "neuron-monitor"
    one_line = json.dumps(json.loads(SAMPLE.read_text()))
    script.write_text(f"#!{sys.executable}\nimport sys, time\nassert sys.argv[1] == '-c'\n"
                      f"while True:\n    print({one_line!r}, flush=True)\n    time.sleep(0.05)\n")  # fmt: skip
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    which, records = _run(tmp_path / "out", samples=2)
    assert which == "neuron-monitor"
    assert {"device", "host"} <= {r["kind"] for r in records}
    assert next(r for r in records if r["kind"] == "device")["neuroncores"] == {"0": 87.25, "1": 85.5}
