"""Which backend errors fail a task once: the operator turns a ``JobInputError`` (bad configuration, a Spot or
missing queue, a missing cluster) into ``AirflowFailException``; anything else may pass on a retry."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.compute.base import JobInputError
from airflow_provider_trainium.compute.batch.backend import BatchInputError
from airflow_provider_trainium.compute.ecs.backend import EcsInputError, EcsPlacementError


@pytest.mark.parametrize("error", [BatchInputError, EcsInputError])
def test_what_the_platform_refuses_for_good_is_an_input_error(error):
    assert issubclass(error, JobInputError) and issubclass(error, ValueError)


def test_ecs_not_placing_a_task_may_pass_on_a_retry():
    assert not issubclass(EcsPlacementError, JobInputError)  # capacity may free up
