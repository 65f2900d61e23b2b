"""The moto worlds of the Batch and ECS tests, shared here."""

from tests.integration.batch.conftest import batch_env
from tests.integration.ecs.conftest import ecs_world, task_progress

__all__ = ["batch_env", "ecs_world", "task_progress"]
