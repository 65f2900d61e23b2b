"""``trainium_mnist_mlp`` with ``dag.test()``: a layout that cannot run stops in the first task. Its success path
runs once, in the deployment (tests/e2e, the lane's shared MNIST run), and in each wheel lane (tests/wheel)."""

from tests.conftest import set_trainium_connection
from tests.dag_runs import get_dag, states


def test_bad_layout_fails_before_any_job_starts(tmp_path, monkeypatch):
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    run = get_dag("trainium_mnist_mlp").test(run_conf={"compute": "local", "nodes": 2, "instance_type": "trn1.2xlarge"})
    result = states(run)
    assert str(run.state) == "failed"
    assert result["check_params"] == "failed"
    assert result["prepare_data"] == "upstream_failed"
    assert not (tmp_path / "runs").exists()
