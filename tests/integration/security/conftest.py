"""The AWS worlds of the ECS and Batch tests (moto server behind Airflow connections), for the rules here."""

from tests.integration.batch.conftest import batch_env  # noqa: F401 (fixture)
from tests.integration.ecs.conftest import ecs_world, task_progress  # noqa: F401 (fixture)
