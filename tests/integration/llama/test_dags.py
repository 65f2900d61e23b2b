"""Both Llama DAGs on local compute: dag.test() of each, and a 3-day backfill of the fine-tune DAG run by a
real scheduler (``airflow backfill create`` + ``airflow scheduler``, ``dag-processor`` and ``api-server``
subprocesses with the LocalExecutor on this test Airflow home's SQLite database).

The DAG runs use ``runtime=eager`` to keep the suite's time in bounds on two cores: the XLA path of the
same trainer is covered by tests/integration/llama/test_training.py.
"""

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import free_port

DAGS = Path(__file__).resolve().parents[3] / "dags"
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
FAST = {"compute": "local", "runtime": "eager", "max_steps": 20, "log_every": 5, "checkpoint_every": 10}
INTERVALS = ["2026-01-01", "2026-01-02"]  # two days show per-interval keys and one shared compilation


def get_dag(dag_id: str):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    return bag.get_dag(dag_id)


def states(dag_id: str, run_id: str) -> dict[str, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dag_id, run_id=run_id).all()
        return {ti.task_id: str(ti.state) for ti in tis}


def registry(root: Path):
    from airflow_provider_trainium.registry import ModelRegistry

    return ModelRegistry(root.as_uri())


@pytest.fixture(scope="module")
def artifact_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("llama-artifacts")
    conn = json.dumps({"conn_type": "trainium", "extra": {"artifact_root": root.as_uri()}})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", conn)
        yield root


@pytest.fixture(scope="module")
def pretrained(artifact_root):
    """One pretrain run registers ``llama-pretrain`` v1 and points ``latest`` at it: the fine-tunes' base."""
    run = get_dag("trainium_llama_pretrain").test(run_conf={**FAST, "max_steps": 30})
    return run


@pytest.mark.slow
def test_pretrain_dag_trains_and_registers(pretrained, artifact_root):
    assert str(pretrained.state) == "success", states(pretrained.dag_id, pretrained.run_id)
    reg = registry(artifact_root)
    assert reg.list_versions("llama-pretrain") == [1]
    assert reg.get_alias("llama-pretrain", "latest").version == 1
    model = reg.get_version("llama-pretrain", 1)
    metrics = model.metrics
    assert metrics["steps"] == 30 and metrics["world_size"] == 2 and metrics["final_loss"] < 4.0
    assert metrics["peak_flops"] is None and metrics["mfu"] is None  # local compute: a CPU has no peak
    (key,) = (artifact_root / "compile-cache" / "trainium_llama_pretrain" / "keys").glob("*.json")
    assert json.loads(key.read_text())["inputs"]["instance_type"] == "trn1.2xlarge"
    # The live stream the run wrote beside its model: every logged step, the final eval, the node's host samples.
    from trainium_trainer.common.stream import read_records

    (model_dir,) = (artifact_root / "llama" / "pretrain").glob("*/model")
    train = read_records(model_dir.as_uri(), "train")
    assert [r["step"] for r in train if r["kind"] == "train"] == [5, 10, 15, 20, 25, 30]
    assert train[-1]["kind"] == "eval" and train[-1]["loss"] == pytest.approx(metrics["eval_loss"], abs=1e-6)
    assert read_records(model_dir.as_uri(), "monitor-node0", kinds=["host"])
    assert not list((artifact_root / "llama" / "pretrain").glob("*/data/stream"))  # no monitor in data preparation
    # The version records what its run cost: 0 on local compute, and the estimate for 1 x trn1.2xlarge.
    cost = model.manifest["cost"]
    assert cost["usd"] == 0.0 and cost["is_estimate"] is True and cost["instance_type"] == "trn1.2xlarge"
    assert cost["estimate_usd"] > 0 and cost["wall_s"] > 0 and cost["price_date"]
    assert not [f for f in model.manifest["files"] if f["path"].startswith("stream/")]  # the model, not the run


def test_bad_layout_fails_before_any_job_starts(artifact_root):
    run = get_dag("trainium_llama_finetune").test(
        run_conf={"compute": "local", "nodes": 2, "instance_type": "trn1.2xlarge"}
    )
    result = states(run.dag_id, run.run_id)
    assert str(run.state) == "failed" and result["check_params"] == "failed"
    assert result["prepare_data"] == "upstream_failed"


class Scheduler:
    """api-server + scheduler as subprocesses on this test's Airflow home.

    SQLite takes one writer at a time: the DAG is serialized and the backfill created by the CLI before
    the scheduler starts, and no dag-processor runs beside it, so no CLI write races the scheduler's.
    """

    def __init__(self, log_dir: Path):
        port = free_port()
        self.env = {
            **os.environ,
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "2",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # Only the backfill's runs: unpausing must not also start today's scheduled run.
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        }
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []
        self.port = port

    def run(self) -> None:
        """The API server (task execution) and the scheduler; the DAG is already serialized."""
        self.start("api-server", "--port", str(self.port), "--host", "127.0.0.1", "--workers", "1")
        # Tasks report to the execution API from their first line: start them only once it answers.
        self.wait_until_api_answers(timeout=300)
        self.start("scheduler")

    def wait_until_api_answers(self, timeout: float) -> None:
        import requests

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[0].poll() is not None:
                pytest.fail(f"the api-server exited with {self.procs[0].returncode}\n{self.tail()}")
            try:
                requests.get(f"http://127.0.0.1:{self.port}/api/v2/monitor/health", timeout=5)
                return
            except requests.ConnectionError:
                time.sleep(1)
        pytest.fail(f"the api-server did not answer within {timeout} s\n{self.tail()}")

    def start(self, *args: str) -> None:
        out = open(self.log_dir / f"{args[0]}.log", "w")  # noqa: SIM115 (closed with the process)
        self.procs.append(
            subprocess.Popen(
                [AIRFLOW, *args], env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )  # fmt: skip
        )

    def cli(self, *args: str) -> str:
        done = subprocess.run([AIRFLOW, *args], env=self.env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def tail(self) -> str:
        return "\n".join(
            f"--- {p.name}\n" + "\n".join(p.read_text().splitlines()[-15:]) for p in self.log_dir.glob("*.log")
        )


def wait_for(predicate, timeout: float, what: str, scheduler: Scheduler):
    """Poll a condition on the database (the scheduler works on its own clock); fail with its logs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(2)
    pytest.fail(f"timed out waiting for {what}\n{scheduler.tail()}")


def finetune_runs() -> dict[str, str]:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        runs = session.query(DagRun).filter_by(dag_id="trainium_llama_finetune", run_type="backfill").all()
        return {r.logical_date.strftime("%Y-%m-%d"): str(r.state) for r in runs}


@pytest.mark.slow
def test_backfill_of_two_days_registers_two_versions_and_a_rerun_none(pretrained, artifact_root, tmp_path):
    assert str(pretrained.state) == "success"
    # The test Airflow home outlives test sessions: drop the DAG's earlier runs and backfills (a backfill
    # skips dates that already have runs, and only one backfill per DAG may be active).
    subprocess.run([AIRFLOW, "dags", "delete", "trainium_llama_finetune", "--yes"], capture_output=True, timeout=300)
    # Local compute remembers finished jobs by name (dag, task, run id): backfill run ids repeat across
    # sessions, so forget this DAG's jobs from earlier sessions (they wrote to another artifact root).
    from airflow_provider_trainium.compute.local.backend import local_state_dir

    for stale in local_state_dir().glob("trainium_llama_finetune-*.json"):
        stale.unlink()
    scheduler = Scheduler(tmp_path)
    try:
        scheduler.cli("dags", "reserialize")
        scheduler.cli("dags", "unpause", "trainium_llama_finetune")
        conf = json.dumps({**FAST, "max_steps": 10})
        scheduler.cli("backfill", "create", "--dag-id", "trainium_llama_finetune", "--from-date", INTERVALS[0],
                      "--to-date", INTERVALS[-1], "--dag-run-conf", conf)  # fmt: skip
        scheduler.run()

        def finished() -> dict[str, str] | None:
            runs = finetune_runs()
            done = len(runs) == len(INTERVALS) and all(s in ("success", "failed") for s in runs.values())
            return runs if done else None

        runs = wait_for(finished, 900, "the backfill runs to finish", scheduler)
        assert runs == dict.fromkeys(INTERVALS, "success"), scheduler.tail()
    finally:
        scheduler.stop()

    reg = registry(artifact_root)
    assert reg.list_versions("llama-finetune") == [1, 2]
    trained_on = sorted(reg.get_version("llama-finetune", v).manifest["source"]["uri"] for v in (1, 2))
    assert [Path(u).parent.parent.name for u in trained_on] == INTERVALS  # keyed by interval, then spec
    holdouts = set()
    for day in INTERVALS:
        (found,) = (artifact_root / "llama" / "finetune" / day).glob("*/evaluation/evaluation.json")
        holdouts.add(json.loads(found.read_text())["data_uri"])
    assert len(holdouts) == 1 and "/holdout/" in holdouts.pop()  # every day judged on the same held-out set
    keys = list((artifact_root / "compile-cache" / "trainium_llama_finetune" / "keys").glob("*.json"))
    assert len(keys) == 1  # one compilation served both days
    latest = reg.get_alias("llama-finetune", "latest")

    # A manual rerun of the middle interval trains under its own spec key: it registers a version (or finds
    # identical bytes) but never moves latest, since manual runs of this DAG do not promote.
    rerun = get_dag("trainium_llama_finetune").test(
        logical_date=datetime(2026, 1, 2, tzinfo=UTC), run_conf={**FAST, "max_steps": 10}
    )
    assert str(rerun.state) == "success", states(rerun.dag_id, rerun.run_id)
    assert states(rerun.dag_id, rerun.run_id)["promote_latest"] in ("skipped", "success")
    after = reg.get_alias("llama-finetune", "latest")
    assert (after is None and latest is None) or after.version == latest.version


def test_empty_interval_skips_training_clearly(artifact_root, tmp_path):
    empty = artifact_root / "inputs" / "day.jsonl"  # inputs must lie under the artifact root
    empty.parent.mkdir(exist_ok=True)
    empty.write_text("{broken\n\n")
    run = get_dag("trainium_llama_finetune").test(
        logical_date=datetime(2026, 2, 1, tzinfo=UTC),
        run_conf={**FAST, "base_model": (artifact_root / "no-model").as_uri(), "input_uri": str(empty)},
    )
    result = states(run.dag_id, run.run_id)
    assert result["has_data"] == "success"
    assert {result[t] for t in ("compile", "finetune", "evaluate", "register", "promote_latest")} == {"skipped"}
    (found,) = (artifact_root / "llama" / "finetune" / "2026-02-01").glob("*/data/index.json")
    index = json.loads(found.read_text())
    assert index["skipped"] and index["malformed_count"] == 1
