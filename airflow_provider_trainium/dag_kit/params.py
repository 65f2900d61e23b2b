"""The run params every Trainium DAG shares, with the JSON Schema that drives the UI trigger form, and the
first-task checks that refuse what a run's conf must not choose (an untrusted image, an input outside the
allowed prefixes) before any job starts."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from airflow.sdk import Param

from airflow_provider_trainium.backend_table import AUTO, compute_choices, compute_description
from airflow_provider_trainium.neuron.catalog import CATALOG

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig

#: The form refuses what is not digest-pinned; ``check_image_param`` also checks the repository.
IMAGE_PATTERN = r"^[^@\s]+@sha256:[0-9a-f]{64}$"


def layout_params(
    instance_type: str = "trn1.2xlarge",
    nodes: int = 1,
    *,
    instance_types: Sequence[str] | None = None,
    computes: Sequence[str] | None = None,
    compute_description: str | None = None,
    stack: str | None = None,
    max_nodes: int | None = None,
    max_cost_usd_ceiling: float | None = None,
) -> dict[str, Param]:
    """``compute``, ``instance_type``, ``nodes``, ``stack`` and the budget; the cross-field rules are checked by
    ``check_layout`` and the stack by the release table, both in the DAG's first task.

    ``instance_types`` and ``computes`` narrow the choices a DAG offers (e.g. multi-node types only);
    ``stack`` fixes the one stack its trainer runs on (``stack_param(only=...)``); ``max_nodes`` caps ``nodes``;
    ``max_cost_usd_ceiling`` is the DAG author's budget ceiling (``budget_params``).
    """
    most = max_nodes or max(i.max_nodes for i in CATALOG.values())
    params = {
        "compute": compute_param(),
        "instance_type": Param(instance_type, enum=sorted(CATALOG)),
        "nodes": Param(nodes, type="integer", minimum=1, maximum=most),
        "stack": stack_param(only=stack),
    }
    params.update(budget_params(max_cost_usd_ceiling))
    if instance_types is not None:
        params["instance_type"] = Param(instance_type, enum=sorted(instance_types))
    if computes is not None:
        params["compute"] = compute_param(only=computes, description=compute_description)
    return params


def stack_param(only: str | None = None) -> Param:
    """``stack``: ``auto`` (the instance family chooses: ``xla`` on Trn1, ``native`` on Trn2/Trn3), ``xla`` or
    ``native``; the first task refuses a stack the family cannot train (``neuron.releases.stack_problem``).

    ``only``: the one stack a DAG's trainer runs on (TorchTitan: ``native``), its default and only choice, so
    every job carries it explicitly and ``auto`` never resolves to a stack the trainer lacks.
    """
    from airflow_provider_trainium.neuron.stack_names import STACK_CHOICES

    if only is not None:
        return Param(only, enum=[only], description=f"training stack: this DAG's trainer runs on {only} only")
    return Param(
        "auto",
        enum=list(STACK_CHOICES),
        description="training stack: auto (xla on Trn1, native on Trn2/Trn3), xla (PyTorch/XLA) or native "
        "(TorchNeuron)",
    )


def budget_params(ceiling_usd: float | None = None) -> dict[str, Param]:
    """``max_cost_usd`` (per job: none by default) and ``allow_over_budget_estimate`` (start a job whose worst
    case exceeds it anyway; the stop when its accrued cost passes the budget still applies).

    ``ceiling_usd``: the DAG author's ceiling. ``max_cost_usd`` then defaults to it and a run's conf may lower it
    but not raise it or clear it; the job operator enforces the same ceiling again before submit
    (``neuron.budget.capped_budget``), so a run that slipped past the form still gets no more.
    """
    if ceiling_usd is not None and (isinstance(ceiling_usd, bool) or not ceiling_usd > 0):
        raise ValueError(f"ceiling_usd must be a positive number of USD, got {ceiling_usd!r}")
    budget = Param(
        None,
        type=["null", "number"],
        exclusiveMinimum=0,
        description="budget of each job in USD: refused before it starts when nodes x price x its timeout "
        "exceeds it, stopped when its accrued cost passes it",
    )
    if ceiling_usd is not None:
        budget = Param(
            float(ceiling_usd),
            type="number",
            exclusiveMinimum=0,
            maximum=float(ceiling_usd),
            description=f"budget of each job in USD, at most ${ceiling_usd:g} (this DAG's ceiling): refused "
            "before it starts when nodes x price x its timeout exceeds it, stopped when its accrued cost passes it",
        )
    return {
        "max_cost_usd": budget,
        "allow_over_budget_estimate": Param(
            False, type="boolean", description="start a job whose worst case exceeds max_cost_usd anyway"
        ),
    }


def runtime_param() -> Param:
    """``runtime``: let the trainer pick (``auto``) or force its ``xla`` or ``eager`` runtime."""
    return Param("auto", enum=["auto", "xla", "eager"], description="force the trainer's runtime")


def tensor_parallel_param() -> Param:
    """``tensor_parallel_size``: NeuronCores per tensor-parallel group (``check_layout`` checks it divides)."""
    return Param(1, type="integer", enum=[1, 2, 4, 8, 16, 32])


def training_params(
    *,
    max_steps: int,
    batch_size: int,
    learning_rate: float,
    checkpoint_every: int,
    log_every: int = 10,
    keep_checkpoints: int = 2,
) -> dict[str, Param]:
    """The training loop's params (steps, batch, learning rate, logging, checkpoints) with their defaults."""
    return {
        "max_steps": Param(max_steps, type="integer", minimum=1, maximum=1_000_000),
        "batch_size": Param(
            batch_size, type="integer", minimum=1, maximum=1024, description="sequences per data-parallel rank"
        ),
        "learning_rate": Param(learning_rate, type="number", exclusiveMinimum=0, maximum=1),
        "log_every": Param(log_every, type="integer", minimum=1),
        "checkpoint_every": Param(checkpoint_every, type="integer", minimum=0, description="0: only at the end"),
        "keep_checkpoints": Param(keep_checkpoints, type="integer", minimum=1, maximum=100),
    }


def corpus_params(*, block_size: int = 64, vocab_size: int = 512, synthetic_records: int = 400) -> dict[str, Param]:
    """The Llama data job's params (``dag_kit.prepare_llama_data``): the corpus, its tokenizer and block size."""
    return {
        "block_size": Param(block_size, type="integer", minimum=8, maximum=32768, description="tokens per sequence"),
        "vocab_size": Param(vocab_size, type="integer", minimum=64, maximum=256_000),
        "input_uri": Param(None, type=["null", "string"], description="text/JSONL corpus; none: synthetic"),
        "synthetic_records": Param(synthetic_records, type="integer", minimum=1, maximum=10_000_000),
    }


def compute_param(only: Collection[str] | None = None, description: str | None = None) -> Param:
    """``compute``: ``auto`` or a registered backend (``only`` narrows it, e.g. to the multi-node ones)."""
    choices = [c for c in compute_choices() if only is None or c == AUTO or c in only]
    description = description or f"{AUTO}: picks one by connection and nodes; {compute_description()}"
    return Param(AUTO, enum=choices, description=description)


def image_param() -> Param:
    """``image``: none (the connection's image, or the one the DAG builds) or a digest in the configured repo."""
    return Param(
        None,
        type=["null", "string"],
        pattern=IMAGE_PATTERN,
        description="training image for ECS/Batch: <ecr_repository of the trainium connection>@sha256:<digest>",
    )


def check_image_param(image: str | None, config: TrainiumConfig) -> None:
    """Refuse a run-conf image outside the trust rule in the DAG's first task (the job operator checks again)."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_trainium.neuron.images import image_problem, trusted_repository

    problem = image_problem(image, trusted_repository(config))
    if problem:
        raise AirflowFailException(problem)


def check_input_param(name: str, uri: str | None, config: TrainiumConfig) -> None:
    """Refuse a run-conf input URI outside the artifact root and the connection's allowed prefixes."""
    if not uri:
        return
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_trainium.neuron.inputs import InputNotAllowedError, allowed_prefixes, check_input

    try:
        check_input(name, uri, allowed_prefixes(config.artifact_root, config.allowed_input_prefixes))
    except InputNotAllowedError as err:
        raise AirflowFailException(str(err)) from err
