"""Subcommands of ``airflow-trainium`` (see :mod:`airflow_provider_trainium.cli`)."""
