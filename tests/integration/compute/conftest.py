"""The moto worlds of the Batch and ECS backend tests, shared with the cost tests."""

from tests.batch.conftest import batch_env  # noqa: F401
from tests.ecs.conftest import ecs_world, task_progress  # noqa: F401
