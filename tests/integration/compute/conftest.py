"""The moto worlds of the Batch and ECS tests, shared here."""

from tests.batch.conftest import batch_env
from tests.ecs.conftest import ecs_world, task_progress

__all__ = ["batch_env", "ecs_world", "task_progress"]
