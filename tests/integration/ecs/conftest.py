"""The ECS fixtures (a cluster in the moto server, moto's task progression)."""

from tests.ecs.conftest import ecs_world, task_progress  # noqa: F401
