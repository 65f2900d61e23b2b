"""Airflow UI plugins of the provider: the Trainium view (``trainium_view``)."""
