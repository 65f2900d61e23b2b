"""``trainium_allreduce_smoke`` end to end with ``dag.test()``: 2 nodes x 2 ranks on local compute."""

import json

import pytest

from tests.conftest import set_trainium_connection
from tests.dag_runs import get_dag, states


@pytest.mark.slow
def test_two_nodes_of_two_ranks_all_reduce_to_the_world_size(tmp_path, monkeypatch):
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    dag = get_dag("trainium_allreduce_smoke")
    run = dag.test(run_conf={"compute": "local", "nodes": 2, "bandwidth_mb": 1})
    assert str(run.state) == "success", states(run)
    (result,) = (tmp_path / "runs" / "trainium_allreduce_smoke").glob("*/allreduce/allreduce.json")
    report = json.loads(result.read_text())
    assert report["ok"] is True and report["world_size"] == 4
    assert report["sum_ones"] == 4 and report["sum_ranks"] == 10  # 1 + 2 + 3 + 4
    assert report["runtime"] == "xla" and report["backend"] == "gloo"  # torch-xla CPU: host gloo


def test_params_offer_only_multi_node_instance_types_and_every_compute():
    dag = get_dag("trainium_allreduce_smoke")
    schema = dag.params.get_param("instance_type").schema
    assert schema["enum"] == ["trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge", "trn3.48xlarge"]
    assert dag.params.get_param("compute").schema["enum"] == ["auto", "local", "ecs", "batch"]  # ecs: one instance
