"""Local compute: a job's nodes as container launchers on this machine, each under its own supervisor.

Only the backend interface is exported; the rest of the folder is the backend's own.
"""

from airflow_provider_trainium.compute.local.backend import LocalBackend

__all__ = ["LocalBackend"]
