"""One ECS task per job: the backend, its task definitions, its status rules and its watch loop.

Only the backend interface is exported; the rest of the folder is the backend's own.
"""

from airflow_provider_trainium.compute.ecs.backend import EcsBackend, EcsInputError, EcsPlacementError

__all__ = ["EcsBackend", "EcsInputError", "EcsPlacementError"]
