"""Pure Trainium knowledge: instance catalog, job spec, launch command and environment.

Nothing here talks to AWS or imports an Airflow operator; every backend builds on it.
"""

from airflow_provider_trainium.neuron.catalog import CATALOG, InstanceType, get_instance_type
from airflow_provider_trainium.neuron.spec import JobSpec, JobSpecError

__all__ = ["CATALOG", "InstanceType", "JobSpec", "JobSpecError", "get_instance_type"]
