"""DAG parse time against a trivial TaskFlow DAG, measured in the same run.

Bytecode is compiled first (``compileall``), as in an installed deployment: with PYTHONDONTWRITEBYTECODE
set, every sample would otherwise pay for compiling source. Each sample is a fresh interpreter that has
loaded what Airflow 3's DAG processor has loaded when it parses a file: the processor forks each parse from a
process that has imported ``airflow.dag_processing.processor`` (timetables, serialization, jsonschema) and,
first, the ``airflow.*`` modules the file imports (``_pre_import_airflow_modules``, on by default). It then
times executing one DAG file: what the child imports itself counts, for every file alike: the provider's
own modules, and the standard provider's TaskFlow decorators that ``airflow.sdk.task`` loads on first use
(the trivial DAG pays for those too, as it does in a real DAG processor).
Reports the median per file, its ratio to the trivial DAG, and what declaring the DAG costs once its modules are
imported (the file parsed a second time in the same process), which separates imports from Airflow's own work.
Target: every DAG within 1.3x.

    python benchmarks/dag_parse.py [--samples 15]
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TRIVIAL = """
from datetime import datetime
from airflow.sdk import dag, task

@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def trivial():
    @task
    def hello():
        return 1
    hello()

trivial()
"""

#: For reference, not a target: what an asset outlet alone costs (Airflow's asset serialization modules).
TRIVIAL_WITH_ASSET = TRIVIAL.replace("@task\n", "@task(outlets=[Asset('x-example://model')])\n").replace(
    "from airflow.sdk import dag, task", "from airflow.sdk import Asset, dag, task"
)

PROBE = """
import importlib.util, sys, time
import structlog
import airflow.dag_processing.processor as processor  # what the DAG processor has loaded before it forks
processor._pre_import_airflow_modules(sys.argv[1], structlog.get_logger())
def parse():
    spec = importlib.util.spec_from_file_location("dagfile", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    start = time.perf_counter()
    spec.loader.exec_module(module)
    return time.perf_counter() - start
first = parse()
print(first, parse())  # the second parse finds every module imported: what declaring the DAG itself costs
"""


def sample(path: Path) -> tuple[float, float]:
    """(the file's first parse, a second parse in the same process: its imports done, only the declaring left)."""
    out = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True)
    first, again = out.stdout.strip().splitlines()[-1].split()
    return float(first), float(again)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--dags", default=str(Path(__file__).resolve().parents[1] / "dags"))
    parser.add_argument("--limit", type=float, default=1.3)
    args = parser.parse_args()

    root = Path(__file__).resolve().parents[1]
    for package in ("airflow_provider_trainium", "trainium_trainer"):  # both are installed, both have bytecode
        compileall.compile_dir(root / package, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        trivial = Path(tmp, "trivial_dag.py")
        trivial.write_text(TRIVIAL)
        with_asset = Path(tmp, "trivial_asset_dag.py")
        with_asset.write_text(TRIVIAL_WITH_ASSET)
        files = [trivial, with_asset, *sorted(Path(args.dags).glob("*.py"))]
        times: dict[Path, list[float]] = {f: [] for f in files}
        declaring: dict[Path, list[float]] = {f: [] for f in files}
        for _ in range(args.samples):  # interleaved so machine load affects every file alike
            for f in files:
                first, again = sample(f)
                times[f].append(first)
                declaring[f].append(again)
        baseline = statistics.median(times[trivial])
        # "declaring": the same file parsed again in the same process, every module already imported: Airflow's
        # own work for the DAG (operators, params validated against their schema when it is scheduled) and ours
        print(f"{'DAG file':40} {'median ms':>10} {'ratio':>7} {'declaring ms':>13}")
        worst = 0.0
        for f in files:
            median = statistics.median(times[f])
            ratio = median / baseline
            if f not in (trivial, with_asset):
                worst = max(worst, ratio)
            name = {trivial: "trivial TaskFlow DAG (baseline)", with_asset: "  same + one asset outlet"}.get(f, f.name)
            print(f"{name:40} {median * 1000:10.1f} {ratio:7.2f} {statistics.median(declaring[f]) * 1000:13.1f}")
    print(f"worst ratio {worst:.2f} (target <= {args.limit})")
    return 0 if worst <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
