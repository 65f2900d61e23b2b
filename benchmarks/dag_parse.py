"""DAG parse time against the same DAG declared with Airflow alone, and against a trivial TaskFlow DAG.

Bytecode is compiled first (``compileall``), as in an installed deployment: with PYTHONDONTWRITEBYTECODE
set, every sample would otherwise pay for compiling source. Each sample is a fresh interpreter that has
loaded what Airflow 3's DAG processor has loaded when it parses a file: the processor forks each parse from a
process that has imported ``airflow.dag_processing.processor`` (timetables, serialization, jsonschema), frozen its
garbage collector (``DagFileProcessorManager.before_run``) and, first, imported the ``airflow.*`` modules the file
imports (``_pre_import_airflow_modules``, on by default). It then times executing one DAG file: what the child
imports itself counts, for every file alike: the provider's own modules, and the standard provider's TaskFlow
decorators that ``airflow.sdk.task`` loads on first use (the other sides pay for those too, as in a real DAG
processor). Reports each file's fastest sample, its ratio to the trivial DAG, what declaring the DAG costs once its
modules are imported (the file parsed a second time in the same process), and its stock twin's fastest sample and
ratio. The fastest, not the median, as Python's ``timeit`` documents: parsing a file is a fixed amount of work, and a
slower sample measures what else the machine was doing. On a shared 2-core machine, runs of the same code gave the
smoke DAG a ratio of medians from 1.16 to 1.37, and a ratio of fastest samples from 1.28 to 1.31.

Target: every DAG within 1.3x of its stock twin: the same DAG written with Airflow alone as Airflow's documentation
writes one (the same schedule, default args and ``Param`` schemas in the DAG's constructor, one TaskFlow task per
task id, of the same kind where the task is one of Airflow's own (a branch, a short circuit), the same edges). The
twin is what Airflow itself spends on a DAG of that shape; the ratio is what the provider adds. The ratio to the
trivial DAG cannot be a target for a large DAG: for ten tasks and eighteen params the twin alone is about 1.8x of
it, since Airflow validates every param of a scheduled DAG against its JSON schema while the file is parsed and
builds every task.

    python benchmarks/dag_parse.py [--samples 15]
"""

from __future__ import annotations

import argparse
import compileall
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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
import gc
import airflow.dag_processing.processor as processor  # what the DAG processor has loaded before it forks
gc.freeze()  # as DagFileProcessorManager.before_run does before its parsing loop, so a child's GC skips them
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


def dags_of(path: Path) -> list[Any]:
    """The DAGs a DAG file declares at module level."""
    import importlib.util

    from airflow.sdk import DAG

    spec = importlib.util.spec_from_file_location(f"dags_of_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [value for value in vars(module).values() if isinstance(value, DAG)]


def twin_decorator(task: Any) -> str:
    """The TaskFlow decorator a task's twin gets: a task of Airflow's own kind (a branch, a short circuit) keeps
    its decorator; any other task becomes ``@task``."""
    return task.custom_operator_name if type(task).__module__.startswith("airflow.") else "@task"


def stock_twin(path: Path) -> str:
    """The source of ``path``'s DAGs declared with Airflow alone: the DAG arguments Airflow works on while parsing
    (schedule, default args, params with their schemas), one TaskFlow task per task id (``twin_decorator``), the
    same edges."""
    from airflow.sdk.definitions._internal.types import NOTSET

    dags = dags_of(path)
    if not dags:
        raise SystemExit(f"{path}: no DAG at module level to build a stock twin of")
    lines = ["import datetime", "from airflow.sdk import DAG, Param, task"]
    for dag in dags:
        decorators = {t.task_id: twin_decorator(t) for t in dag.tasks}
        steps = {decorator: f"step_{n}" for n, decorator in enumerate(sorted(set(decorators.values())))}
        for decorator, function in steps.items():
            lines += [decorator, f"def {function}():", "    return True"]
        lines.append("PARAMS = {")
        for name in dag.params:
            param = dag.params.get_param(name)
            default = "" if param.value is NOTSET else f"{param.value!r}, "
            lines.append(f"    {name!r}: Param({default}description={param.description!r}, schema={param.schema!r}),")
        lines.append("}")
        lines.append("with DAG(")
        lines.append(f"    {dag.dag_id!r}, schedule={dag.schedule!r}, start_date=datetime.datetime(2026, 1, 1),")
        lines.append(f"    catchup=False, default_args={dict(dag.default_args)!r}, params=PARAMS,")
        lines.append(") as dag:")
        lines.append("    tasks = {")
        for task_id, decorator in decorators.items():
            lines.append(f"        {task_id!r}: {steps[decorator]}.override(task_id={task_id!r})(),")
        lines.append("    }")
        edges = sorted((upstream, t.task_id) for t in dag.tasks for upstream in t.upstream_task_ids)
        lines.append(f"    for upstream, downstream in {edges!r}:")
        lines.append("        tasks[upstream] >> tasks[downstream]")
    return "\n".join(lines) + "\n"


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
        dag_files = sorted(Path(args.dags).glob("*.py"))
        twins = {f: Path(tmp, f"stock_twin_of_{f.name}") for f in dag_files}
        for f, twin in twins.items():
            twin.write_text(stock_twin(f))
        files = [trivial, with_asset, *dag_files, *twins.values()]
        times: dict[Path, list[float]] = {f: [] for f in files}
        declaring: dict[Path, list[float]] = {f: [] for f in files}
        for _ in range(args.samples):  # interleaved so machine load affects every file alike
            for f in files:
                first, again = sample(f)
                times[f].append(first)
                declaring[f].append(again)
        fastest = {f: min(times[f]) for f in files}
        baseline = fastest[trivial]
        # "declaring": the same file parsed again in the same process, every module already imported: Airflow's
        # own work for the DAG (operators, params validated against their schema when it is scheduled) and ours
        print(f"{'DAG file':34} {'ms':>6} {'/trivial':>8} {'declaring ms':>12} {'twin ms':>8} {'/twin':>6}")
        for f in (trivial, with_asset):
            name = "trivial TaskFlow DAG (baseline)" if f == trivial else "  same + one asset outlet"
            decl = min(declaring[f]) * 1000
            print(f"{name:34} {fastest[f] * 1000:6.1f} {fastest[f] / baseline:8.2f} {decl:12.1f}")
        worst = 0.0
        for f, twin in twins.items():
            ratio = fastest[f] / fastest[twin]
            worst = max(worst, ratio)
            decl = min(declaring[f]) * 1000
            print(
                f"{f.name:34} {fastest[f] * 1000:6.1f} {fastest[f] / baseline:8.2f} {decl:12.1f} "
                f"{fastest[twin] * 1000:8.1f} {ratio:6.2f}"
            )
    print(f"worst ratio to a stock twin {worst:.2f} (target <= {args.limit})")
    return 0 if worst <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
