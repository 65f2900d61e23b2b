"""``@task.trainium``'s arguments: the operator's, checked when the DAG file is parsed."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.decorators.trainium import trainium_task


def test_a_misspelt_argument_fails_at_decoration_naming_the_right_one():
    # a mapped task (.expand) would build its operator only when it runs, and a TypeError there is retried
    with pytest.raises(TypeError, match=r"unexpected keyword arguments 'nodez' \(did you mean 'nodes'\?\)"):
        trainium_task(instance_type="trn1.2xlarge", nodez=2)


def test_the_operators_arguments_are_accepted_but_not_what_the_function_replaces():
    trainium_task(instance_type="trn1.2xlarge", nodes=2, retries=1, durable=True, multiple_outputs=False)
    with pytest.raises(TypeError, match="it takes no command"):
        trainium_task(command=["python", "x.py"])


def test_a_symlink_in_code_dir_is_refused_and_nothing_is_uploaded(tmp_path):
    from airflow.sdk import DAG

    from airflow_provider_trainium.code_bundle import CodeBundleError
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig

    code, root = tmp_path / "code", tmp_path / "artifacts"
    code.mkdir()
    (tmp_path / "credentials").write_text("[default]\naws_secret_access_key = not-to-be-shipped\n")
    (code / "helper.py").symlink_to(tmp_path / "credentials")
    with DAG("symlinked_code", schedule=None):

        @trainium_task(code_dir=str(code), instance_type="trn1.2xlarge")
        def train() -> int:
            return 1

        operator = train().operator
    with pytest.raises(CodeBundleError, match="symlink, helper.py"):
        operator.code_uri({}, TrainiumConfig(artifact_root=root.as_uri()))
    assert not root.exists()


def test_execution_timeout_is_the_jobs_timeout_and_a_budget_sets_it_when_absent(tmp_path, monkeypatch):
    """Two trn1.32xlarge nodes cost $43/h: $50 affords 4186 s; an explicit hour is kept as it is."""
    from datetime import timedelta

    from airflow.sdk import DAG

    from tests.conftest import set_trainium_connection
    from tests.unit.operators.test_job import context

    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    timeouts = {}
    for name, extra in (("budget", {}), ("given", {"execution_timeout": timedelta(hours=1)})):
        with DAG(f"timeout_{name}", schedule=None):

            @trainium_task(instance_type="trn1.32xlarge", nodes=2, max_cost_usd=50, compute="local", **extra)
            def train() -> int:
                return 1

            operator = train().operator
        timeouts[name] = operator.prepare(context()).spec.timeout_seconds
    assert timeouts == {"budget": 4186, "given": 3600}
