"""MNIST MLP training throughput: torch-xla CPU against eager CPU, 1 and 2 ranks, in one run.

Also reports XLA graphs compiled by a training run with a cold compile cache and after the compile step
(warm), which is what the DAG's compile task buys on Trainium.

    python benchmarks/mnist_throughput.py [--epochs 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.neuron.spec import JobSpec


def train(work: Path, data_uri: str, name: str, runtime: str, ranks: int, *extra: str) -> dict:
    out = work / name
    spec = JobSpec(
        name="bench",
        entry_point="trainium_trainer.mnist_mlp.train",
        args=("--data-uri", data_uri, "--lr", "0.05", "--momentum", "0.9", *extra),
        env={"TRAINIUM_RUNTIME": runtime, "PJRT_DEVICE": "CPU"},
        processes_per_node=ranks,
        output_uri=out.as_uri(),
    )
    backend = LocalBackend(work / "state")
    lines: list[str] = []
    status = backend.wait(backend.submit(spec, name, {}), lines.append, 1800)
    if status.state is not JobState.SUCCEEDED:
        sys.exit("\n".join(lines[-30:]))
    return json.loads((out / "metrics.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    from trainium_trainer.mnist_mlp.prepare import prepare

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = (work / "data").as_uri()
        prepare(data)
        epochs = ("--epochs", str(args.epochs))
        rows = []
        for ranks in (1, 2):
            eager = train(work, data, f"eager{ranks}", "eager", ranks, *epochs)
            xla = train(work, data, f"xla{ranks}", "xla", ranks, *epochs)
            rows.append((ranks, eager, xla))
        cache = ("--compile-cache-uri", (work / "cache").as_uri())
        cold = train(work, data, "cold", "xla", 2, *epochs, *cache)
        trial = train(work, data, "trial", "xla", 2, *epochs, "--compile-cache-uri", (work / "cache2").as_uri(),
                      "--compile-only", "--max-steps", "10")  # fmt: skip
        warm = train(work, data, "warm", "xla", 2, *epochs, "--compile-cache-uri", (work / "cache2").as_uri())

    header = ("ranks", "eager samples/s", "xla samples/s", "xla/eager", "eager acc", "xla acc")
    print("{:>5} {:>16} {:>14} {:>10} {:>10} {:>8}".format(*header))
    for ranks, eager, xla in rows:
        ratio = xla["samples_per_second"] / eager["samples_per_second"]
        print(
            f"{ranks:>5} {eager['samples_per_second']:>16.0f} {xla['samples_per_second']:>14.0f} {ratio:>10.3f}"
            f" {eager['accuracy']:>10.4f} {xla['accuracy']:>8.4f}"
        )
    print()
    print(f"{'XLA CPU, 2 ranks':28} {'graphs compiled':>16} {'missing from cache':>19}")
    print(f"{'cold cache':28} {cold['xla_compilations']:>16} {cold['xla_cache_missing']:>19}")
    print(f"{'compile step (10 steps)':28} {trial['xla_compilations']:>16} {trial['xla_cache_missing']:>19}")
    print(f"{'training after compile step':28} {warm['xla_compilations']:>16} {warm['xla_cache_missing']:>19}")


if __name__ == "__main__":
    main()
