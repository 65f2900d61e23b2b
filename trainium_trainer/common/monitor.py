"""Per-node device and host sampler: writes ``device`` and ``host`` records to ``stream/monitor-node<N>/``.

In the Neuron image, ``neuron-monitor`` (aws-neuron-tools) streams one JSON report per period to stdout; each
report becomes a device record (utilization per NeuronCore, device memory of all Neuron applications, i.e.
all ranks, summed) and a host record (``system_data``: vCPU and memory). Where ``neuron-monitor`` is not on
PATH (CPU machines, tests), a host sampler writes host records with the same schema from psutil or /proc.

    python -m trainium_trainer.common.monitor --output-uri URI --node N [--every-s 5] [--parent PID]

The launcher starts it next to the job (torchrun, or its one process). It stops on SIGTERM or as soon as
``--parent`` is no longer its parent (the job ended), writing what it buffered; a job shorter than the first
sample's wait still gets one sample. It never fails the job: errors end only the sampler.
Imports neither torch nor Airflow.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trainium_trainer import boundary
from trainium_trainer.common.stream import DEFAULT_EVERY_S, StreamWriter

log = logging.getLogger("trainer.monitor")

DEFAULT_SAMPLE_S = 5.0
#: Where aws-neuronx-tools installs neuron-monitor; the Neuron DLC also puts it on PATH (docs/fidelity.md).
NEURON_BIN = Path("/opt/aws/neuron/bin/neuron-monitor")
_TICK_S = 0.5


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _get(mapping: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def parse_report(report: Mapping[str, Any], node: int, now: float | None = None) -> list[dict[str, Any]]:
    """One neuron-monitor report as a device record and, when it has system data, a host record.

    Every training rank is a Neuron application of its own (an entry of ``neuron_runtime_data``): their
    ``neuroncores_in_use`` are merged (indexed by the instance's NeuronCore number) and their device memory
    summed. Missing groups or fields give null or empty values, never an exception.
    """
    now = time.time() if now is None else now
    cores: dict[str, float] = {}
    device_mem: int | None = None
    for runtime in report.get("neuron_runtime_data") or []:
        body = _get(runtime, "report")
        in_use = _get(body, "neuroncore_counters", "neuroncores_in_use")
        for index, data in (in_use or {}).items() if isinstance(in_use, Mapping) else ():
            utilization = _number(_get(data, "neuroncore_utilization"))
            if utilization is not None:
                cores[str(index)] = round(utilization, 2)
        used = _number(_get(body, "memory_used", "neuron_runtime_used_bytes", "neuron_device"))
        if used is not None:
            device_mem = (device_mem or 0) + int(used)
    ordered = dict(sorted(cores.items(), key=lambda item: int(item[0]) if item[0].isdigit() else 1 << 30))
    records = [boundary.record(boundary.KIND_DEVICE, time=now, node=node, neuroncores=ordered,
                               device_mem_used_bytes=device_mem)]  # fmt: skip
    average = _get(report, "system_data", "vcpu_usage", "average_usage")
    idle = _number(_get(average, "idle"))
    total = _number(_get(report, "system_data", "memory_info", "memory_total_bytes"))
    used_mem = _number(_get(report, "system_data", "memory_info", "memory_used_bytes"))
    if idle is not None and total is not None and used_mem is not None:
        records.append(_host(now, node, 100.0 - idle, int(used_mem), int(total)))
    return records


def _host(now: float, node: int, cpu: float, used: int, total: int) -> dict[str, Any]:
    cpu = round(min(100.0, max(0.0, cpu)), 2)
    return boundary.record(boundary.KIND_HOST, time=now, node=node, cpu_percent=cpu, mem_used_bytes=used,
                           mem_total_bytes=total)  # fmt: skip


class HostSampler:
    """CPU (over the time since the previous sample) and memory of this host: psutil if installed, else /proc."""

    def __init__(self, node: int, proc: Path = Path("/proc")) -> None:
        self.node = node
        self.proc = proc
        try:
            import psutil
        except ImportError:
            psutil = None
        self.psutil = psutil if proc == Path("/proc") else None
        self.previous = self._cpu_times()

    def _cpu_times(self) -> tuple[float, float]:
        """(busy, total) jiffies of the aggregate ``cpu`` line of /proc/stat (idle and iowait are not busy)."""
        if self.psutil is not None:
            self.psutil.cpu_percent(interval=None)  # starts psutil's own interval
            return (0.0, 0.0)
        fields = [float(v) for v in (self.proc / "stat").read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
        total = sum(fields[:8])
        return (total - idle, total)

    def _memory(self) -> tuple[int, int]:
        if self.psutil is not None:
            memory = self.psutil.virtual_memory()
            return int(memory.total - memory.available), int(memory.total)
        info = {}
        for line in (self.proc / "meminfo").read_text().splitlines():
            name, _, rest = line.partition(":")
            info[name] = int(rest.split()[0]) * 1024
        total = info["MemTotal"]
        return total - info.get("MemAvailable", info.get("MemFree", 0)), total

    def sample(self, now: float | None = None) -> dict[str, Any]:
        now = time.time() if now is None else now
        if self.psutil is not None:
            cpu = float(self.psutil.cpu_percent(interval=None))
        else:
            busy, total = self._cpu_times()
            cpu = 100.0 * (busy - self.previous[0]) / (total - self.previous[1]) if total > self.previous[1] else 0.0
            self.previous = (busy, total)
        used, total_mem = self._memory()
        return _host(now, self.node, cpu, used, total_mem)


def neuron_monitor_config(every_s: float) -> dict[str, Any]:
    """Only the metric groups the records use, at the sampling period."""
    period = f"{max(1, round(every_s))}s"
    return {
        "period": period,
        "neuron_runtimes": [
            {"tag_filter": ".*", "metrics": [{"type": "neuroncore_counters"}, {"type": "memory_used"}]}
        ],
        "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}],
    }


class Sampler:
    """Runs one node's sampling loop until ``should_stop()``; records go to ``writer``."""

    def __init__(self, writer: StreamWriter, node: int, every_s: float, should_stop: Callable[[], bool]) -> None:
        self.writer, self.node, self.every_s, self.should_stop = writer, node, every_s, should_stop

    def run(self) -> str:
        """Sample until told to stop; returns which sampler ran (``neuron-monitor`` or ``host``)."""
        try:
            binary = shutil.which("neuron-monitor") or (str(NEURON_BIN) if NEURON_BIN.is_file() else None)
            if binary and self._neuron_monitor(binary):
                return "neuron-monitor"
            self._host()
            return "host"
        finally:
            self.writer.close()

    def _wait(self, seconds: float) -> bool:
        """Sleep in short ticks; False as soon as the sampler should stop."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.should_stop():
                return False
            time.sleep(min(_TICK_S, max(0.0, deadline - time.monotonic())))
        return not self.should_stop()

    def _host(self) -> None:
        """The first sample after at most a second, then one every period; a job that ended sooner still gets one,
        taken as the sampler stops, so every job's stream shows its node."""
        sampler = HostSampler(self.node)
        wait = min(1.0, self.every_s)
        sampled = False
        while self._wait(wait):
            self.writer.append(sampler.sample())
            sampled, wait = True, self.every_s
        if not sampled:
            self.writer.append(sampler.sample())

    def _neuron_monitor(self, binary: str) -> bool:
        """Follow neuron-monitor's reports; False if it could not run (the host sampler takes over)."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as conf:
            json.dump(neuron_monitor_config(self.every_s), conf)
        try:
            process = subprocess.Popen([binary, "-c", conf.name], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       stdin=subprocess.DEVNULL, text=True)  # fmt: skip
        except OSError as err:
            log.warning("neuron-monitor could not start (%s); sampling the host only", err)
            os.unlink(conf.name)
            return False
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        reports = 0
        try:
            while not self.should_stop():
                try:
                    line = lines.get(timeout=_TICK_S)
                except queue.Empty:
                    continue
                if line is None:
                    break
                try:
                    report = json.loads(line)
                except ValueError:
                    continue
                reports += 1
                for record in parse_report(report, self.node):
                    self.writer.append(record)
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
            os.unlink(conf.name)
        if reports == 0 and not self.should_stop():
            log.warning("neuron-monitor ended without a report; sampling the host only")
            return False
        return True


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s monitor: %(message)s")
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-uri", required=True)
    parser.add_argument("--node", type=int, default=0)
    parser.add_argument("--every-s", type=float, default=float(env(boundary.ENV_MONITOR_EVERY_S, DEFAULT_SAMPLE_S)))
    parser.add_argument(
        "--stream-every-s", type=float, default=float(env(boundary.ENV_STREAM_EVERY_S, DEFAULT_EVERY_S))
    )
    parser.add_argument("--parent", type=int, default=None, help="stop once this process is no longer the parent")
    args = parser.parse_args(argv)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())

    def should_stop() -> bool:
        return stopping.is_set() or (args.parent is not None and os.getppid() != args.parent)

    try:
        writer = StreamWriter(args.output_uri, boundary.monitor_source(args.node), every_s=args.stream_every_s)
        Sampler(writer, args.node, args.every_s, should_stop).run()
    except Exception as err:  # noqa: BLE001 - an observer: the job goes on without it
        log.warning("the node monitor stopped: %s", err)
        sys.exit(0)


if __name__ == "__main__":
    main()
