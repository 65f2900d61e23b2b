"""AWS Batch multi-node parallel jobs: the backend, its job definitions, its status rules and its watch loop.

Only the backend interface is exported; the rest of the folder is the backend's own.
"""

from airflow_provider_trainium.compute.batch.backend import BatchBackend, BatchInputError

__all__ = ["BatchBackend", "BatchInputError"]
