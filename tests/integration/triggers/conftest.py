"""The moto ECS world of the ECS tests, for the worker-side resume test."""

from tests.integration.ecs.conftest import ecs_world, task_progress

__all__ = ["ecs_world", "task_progress"]
