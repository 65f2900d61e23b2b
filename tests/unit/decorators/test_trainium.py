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
