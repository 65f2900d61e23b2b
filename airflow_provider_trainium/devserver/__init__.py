"""A whole Airflow deployment on this machine, as users run one: PostgreSQL, API server, scheduler,
DAG processor and triggerer with the LocalExecutor (``make airflow``; ``python -m
airflow_provider_trainium.devserver``). The end-to-end tests start the same deployment in a throwaway home.
"""

from airflow_provider_trainium.devserver.deployment import COMPONENTS, Deployment
from airflow_provider_trainium.devserver.postgres import PostgresCluster

__all__ = ["COMPONENTS", "Deployment", "PostgresCluster"]
