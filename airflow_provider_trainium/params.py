"""The run params every Trainium DAG shares, importable from here as DAG files always have: they live in the DAG
kit (``dag_kit.params``), beside the first-task checks that use them."""

from airflow_provider_trainium.dag_kit.params import (
    IMAGE_PATTERN,
    budget_params,
    check_image_param,
    check_input_param,
    compute_param,
    corpus_params,
    image_param,
    layout_params,
    runtime_param,
    stack_param,
    tensor_parallel_param,
    training_params,
)

__all__ = [
    "IMAGE_PATTERN",
    "budget_params",
    "check_image_param",
    "check_input_param",
    "compute_param",
    "corpus_params",
    "image_param",
    "layout_params",
    "runtime_param",
    "stack_param",
    "tensor_parallel_param",
    "training_params",
]
