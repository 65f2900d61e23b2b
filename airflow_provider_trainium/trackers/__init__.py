"""Copies of a finished training run for experiment trackers (MLflow, TensorBoard); off unless configured.

``gather`` turns a run (its job layout, stream, cost and metrics summary) into one :class:`~.gather.RunExport`;
``mlflow_export`` and ``tensorboard_export`` write it; ``export`` decides which run and turns every failure
into a warning, because the trained model matters more than its charts.
"""
