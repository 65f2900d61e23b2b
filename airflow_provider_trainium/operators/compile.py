"""``NeuronCompileOperator``: fill the persistent compilation cache before the paid training run.

On Trainium the training command runs under ``neuron_parallel_compile`` for a few steps: it extracts the
XLA graphs and compiles them in parallel into the cache at ``compile_cache_uri`` (``s3://`` works). On
local compute the same trial runs on torch-xla CPU with its persistent cache. The cache key covers the
graphs, so the trial must use the training run's batch size, parallel layout and node count: pass the
same ``job_args``, ``instance_type``, ``nodes`` and ``processes_per_node`` as the training task.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context

from airflow_provider_trainium.compute.base import JobHandle
from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.operators.training import NeuronTrainingOperator

NEURON_PARALLEL_COMPILE = "neuron_parallel_compile"


class NeuronCompileOperator(NeuronTrainingOperator):
    """Run the training entry point with ``--compile-only --max-steps N``; returns the compile metrics.

    :param compile_cache_uri: the cache to fill; default ``<artifact_root>/compile-cache/<dag_id>``.
    :param trial_steps: steps of the trial (neuron_parallel_compile needs 10-15 on Trainium).
    """

    def __init__(self, *, trial_steps: int = 10, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.trial_steps = trial_steps

    def build_spec(self, context: Context, config: TrainiumConfig, compute: str) -> JobSpec:
        if not self.compile_cache_uri:
            self.compile_cache_uri = default_compile_cache_uri(config, context["ti"].dag_id)
        trial_args = [*self.job_args, "--compile-only", "--max-steps", str(self.trial_steps)]
        original, self.job_args = self.job_args, trial_args
        try:
            spec = super().build_spec(context, config, compute)
        finally:
            self.job_args = original
        return spec.with_changes(output_uri=f"{spec.output_uri}/compile").validate()

    def wrapper(self, compute: str) -> tuple[str, ...]:
        return () if compute == "local" else (NEURON_PARALLEL_COMPILE,)

    def on_success(self, context: Context, spec: JobSpec, handle: JobHandle) -> Any:
        metrics = self.load_metrics(context, str(spec.output_uri))
        return {"compile_cache_uri": self.compile_cache_uri, **metrics}


def default_compile_cache_uri(config: TrainiumConfig, dag_id: str) -> str:
    return f"{config.artifact_root.rstrip('/')}/compile-cache/{dag_id}"
