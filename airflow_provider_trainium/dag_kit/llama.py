"""The Llama recipe's data step, shared by the Llama and TorchTitan pretrain DAGs: the corpus becomes a tokenizer
and token blocks at the URIs the run plan chose (``stage_uris`` plus ``tokenizer_uri``), so the training step
reads exactly what this run prepared.

Its params are ``params.corpus_params``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.dag_kit.templates import job_layout, planned

if TYPE_CHECKING:
    from airflow_provider_trainium.operators.job import TrainiumJobOperator


def prepare_llama_data(image: str, *, task_id: str = "prepare_data", **kwargs: Any) -> TrainiumJobOperator:
    """The Llama data job on one node: the ``input_uri`` corpus (or the run date's synthetic one) into blocks at
    the plan's ``data_uri``, with a tokenizer trained on it at the plan's ``tokenizer_uri``
    (params: ``params.corpus_params``). ``kwargs`` go to the operator (``trigger_rule``)."""
    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    return TrainiumJobOperator(
        task_id=task_id,
        entry_point="trainium_trainer.llama.data",
        job_args=[
            "--output-uri",
            planned("data_uri"),
            "{{ '--input-uri' if params.input_uri else '--synthetic-date' }}",
            "{{ params.input_uri or (dag_run.run_after | ds) }}",
            "--synthetic-records",
            "{{ params.synthetic_records }}",
            "--tokenizer-uri",
            planned("tokenizer_uri"),
            "--train-tokenizer",
            "--vocab-size",
            "{{ params.vocab_size }}",
            "--block-size",
            "{{ params.block_size }}",
        ],
        output_uri=planned("data_uri"),
        **job_layout(image, single_node=True, instance_type=None),
        **kwargs,
    )
