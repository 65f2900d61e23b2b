"""A whole Airflow deployment on this machine, as users run one: PostgreSQL, API server, scheduler,
DAG processor and triggerer with the LocalExecutor (``make airflow``; ``python -m
devserver``). The end-to-end tests start the same deployment in a throwaway home.

A checkout's tool, not part of the wheel: a deployment installs the provider, never this (it defaults to
``admin/admin``).
"""

from devserver.deployment import COMPONENTS, Deployment
from devserver.postgres import PostgresCluster

__all__ = ["COMPONENTS", "Deployment", "PostgresCluster"]
