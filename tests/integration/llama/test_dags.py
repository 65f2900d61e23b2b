"""Both Llama DAGs on local compute through dag.test(): the pretrain, and the fine-tune over two intervals.
A backfill through the real scheduler and API is tests/e2e/test_attacks.py's.

The DAG runs use ``runtime=eager`` to keep the suite's time in bounds on two cores: the XLA path of the
same trainer is covered by tests/integration/llama/test_training.py.
"""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[3] / "dags"
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


@pytest.mark.slow
def test_two_intervals_register_two_versions_from_one_compilation_and_promote_none(pretrained, artifact_root):
    """Two days of the fine-tune DAG (``dag.test()`` per logical date; the real scheduler's backfill is
    tests/e2e/test_attacks.py's): one version per interval, keyed by its interval, both judged on the same
    held-out set, one compilation serving both, and ``latest`` untouched since manual runs do not promote."""
    assert str(pretrained.state) == "success"
    dag = get_dag("trainium_llama_finetune")
    for day in INTERVALS:
        run = dag.test(logical_date=datetime.fromisoformat(day).replace(tzinfo=UTC),
                       run_conf={**FAST, "max_steps": 10})  # fmt: skip
        result = states(run.dag_id, run.run_id)
        assert str(run.state) == "success", result
        assert result["promote_latest"] in ("skipped", "success")

    reg = registry(artifact_root)
    assert reg.list_versions("llama-finetune") == [1, 2]
    trained_on = sorted(reg.get_version("llama-finetune", v).manifest["source"]["uri"] for v in (1, 2))
    assert [Path(u).parent.parent.name for u in trained_on] == INTERVALS  # keyed by interval, then spec
    holdouts, fingerprints = set(), set()
    for day in INTERVALS:
        (found,) = (artifact_root / "llama" / "finetune" / day).glob("*/evaluation/evaluation.json")
        holdouts.add(json.loads(found.read_text())["data_uri"])
        fingerprints.add(json.loads(found.with_name("verdict.json").read_text())["holdout_fingerprint"])
    holdout = holdouts.pop()
    assert not holdouts and "/holdout/" in holdout  # every day judged on the same held-out set
    assert len(fingerprints) == 1 and None not in fingerprints  # ... the same sealed manifest, which register checked
    seals = list(Path(holdout.removeprefix("file://"), "holdout-seals").glob("*.json"))
    assert len(seals) == 2  # each run's prepare_holdout sealed it with its own key, neither overwriting the other
    keys = list((artifact_root / "compile-cache" / "trainium_llama_finetune" / "keys").glob("*.json"))
    assert len(keys) == 1  # one compilation served both days
    assert reg.get_alias("llama-finetune", "latest") is None


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
