"""Apache Airflow provider for AWS Trainium training jobs."""

__version__ = "0.1.0"
