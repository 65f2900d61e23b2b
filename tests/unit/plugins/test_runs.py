"""What the run list derives from a training task's XComs: final metrics and the versions to compare with."""

from __future__ import annotations

from airflow_provider_trainium.plugins.runs import final_metrics, previous_versions


def run(run_id: str, name: str | None, version: int | None) -> dict:
    return {"run_id": run_id, "model": None if name is None else {"name": name, "version": version, "uri": "u"}}


def test_final_metrics_take_each_trainers_names():
    assert final_metrics({"accuracy": 0.95, "samples_per_second": 3.0}) == {"loss": None, "accuracy": 0.95}
    assert final_metrics({"final_loss": 2.1, "eval_loss": 2.3}) == {"loss": 2.1, "accuracy": None}
    assert final_metrics({"eval_loss": 2.3}) == {"loss": 2.3, "accuracy": None}
    assert final_metrics({}) == {"loss": None, "accuracy": None}


def test_previous_versions_are_older_versions_of_the_same_model_newest_first():
    current = run("r5", "mnist-mlp", 3)
    candidates = [
        current,
        run("r4", "mnist-mlp", 2),
        run("r1", "mnist-mlp", 1),
        run("r3", "llama", 1),
        run("r2", None, None),
        run("r6", "mnist-mlp", 4),
        run("r0", "mnist-mlp", 1),  # an older run that registered the same version: the first listed wins
    ]
    assert [c["run_id"] for c in previous_versions(current, candidates)] == ["r4", "r1"]


def test_a_run_that_registered_nothing_has_nothing_to_compare():
    assert previous_versions(run("r1", None, None), [run("r0", "mnist-mlp", 1)]) == []
