"""``trainium_mnist_mlp`` with ``dag.test()``: a layout that cannot run stops in the first task. Its success path
runs once, in the deployment (tests/e2e, the lane's shared MNIST run), and in each wheel lane (tests/wheel)."""

from pathlib import Path

from tests.conftest import set_trainium_connection

DAGS = Path(__file__).resolve().parents[3] / "dags"


def states(dag_run) -> dict[str, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dag_run.dag_id, run_id=dag_run.run_id).all()
        return {ti.task_id: str(ti.state) for ti in tis}


def test_bad_layout_fails_before_any_job_starts(tmp_path, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    run = bag.get_dag("trainium_mnist_mlp").test(run_conf={"compute": "local", "nodes": 2,
                                                          "instance_type": "trn1.2xlarge"})  # fmt: skip
    result = states(run)
    assert str(run.state) == "failed"
    assert result["check_params"] == "failed"
    assert result["prepare_data"] == "upstream_failed"
    assert not (tmp_path / "runs").exists()
