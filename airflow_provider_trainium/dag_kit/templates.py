"""What a DAG file declares as templates: the DAG arguments every Trainium DAG shares, trainer flags and operator
arguments that read the run params, and the values (plan, another task's output or compile cache) that Airflow
renders when a task runs.

A template is resolved in the worker, from the run's identity and the DAG's layout, so the DAG file holds no URI
and a run's conf cannot point a task elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from airflow_provider_trainium.dag_kit.plan import PLAN_TASK_ID, plan_record
from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow.sdk import DAG

#: The run's ``image`` param, or none (the connection's image).
IMAGE_FROM_PARAMS = "{{ params.image or '' }}"
#: The run's ``image`` param, else the image this run's ``build_image`` task built (``llama.image_then_data``), else
#: none (the connection's image).
IMAGE_BUILT_OR_FROM_PARAMS = "{{ params.image or ti.xcom_pull(task_ids='build_image') or '' }}"
#: Passes the ``runtime`` param (``runtime_param``) to the trainer; ``auto`` lets it choose.
RUNTIME_ENV = {boundary.ENV_RUNTIME: "{{ '' if params.runtime == 'auto' else params.runtime }}"}

#: Trainer flags whose name is not the param's name with dashes.
FLAG_NAMES = {"learning_rate": "--lr"}


def planned(key: str, task_id: str = PLAN_TASK_ID) -> str:
    """A template for one value of the run plan that the ``task_id`` task wrote (``plan_record``)."""
    return "{{ trainium_plan('" + task_id + "')['" + key + "'] }}"


def output_of(task_id: str) -> str:
    """A template for the output URI of this run's ``task_id`` job task, derived as that task chose it."""
    return "{{ trainium_output('" + task_id + "') }}"


def compile_cache_of(task_id: str) -> str:
    """A template for the compile cache this run's ``task_id`` compile task filled, derived as it chose it."""
    return "{{ trainium_compile_cache('" + task_id + "') }}"


class TrainingUris(TypedDict):
    """Where a training step writes its model and its checkpoints."""

    output_uri: str
    checkpoint_uri: str


def planned_args(*keys: str, task_id: str = PLAN_TASK_ID) -> list[str]:
    """Trainer flags for run plan values, in order: ``data_uri`` -> ``["--data-uri", planned("data_uri")]``."""
    return [arg for key in keys for arg in ("--" + key.replace("_", "-"), planned(key, task_id))]


def planned_training_uris(task_id: str = PLAN_TASK_ID) -> TrainingUris:
    """The training step's ``output_uri`` and ``checkpoint_uri`` from a plan laid out with ``stage_uris``."""
    return {"output_uri": planned("model_uri", task_id), "checkpoint_uri": planned("checkpoint_uri", task_id)}


def _template_macros() -> dict[str, Any]:
    """The functions ``planned``, ``output_of`` and ``compile_cache_of`` templates call (``dag_args`` adds them
    to the DAG's ``user_defined_macros``); each gets the template's context."""
    from jinja2 import pass_context

    @pass_context
    def trainium_plan(ctx: Any, task_id: str = PLAN_TASK_ID) -> dict[str, Any]:
        return plan_record(ctx.get_all(), task_id)

    @pass_context
    def trainium_output(ctx: Any, task_id: str) -> str:
        from airflow_provider_trainium.dag_kit.helpers import fail_on_mismatch
        from airflow_provider_trainium.operators.run_outputs import task_output_uri

        return fail_on_mismatch(lambda: task_output_uri(ctx.get_all(), task_id))

    @pass_context
    def trainium_compile_cache(ctx: Any, task_id: str) -> str:
        from airflow_provider_trainium.dag_kit.helpers import fail_on_mismatch
        from airflow_provider_trainium.operators.run_outputs import task_cache_uri

        return fail_on_mismatch(lambda: task_cache_uri(ctx.get_all(), task_id))

    return {
        "trainium_plan": trainium_plan,
        "trainium_output": trainium_output,
        "trainium_compile_cache": trainium_compile_cache,
    }


def dag_args(*, retries: int = 1, start_date: datetime = datetime(2026, 1, 1)) -> dict[str, Any]:
    """The DAG arguments every Trainium DAG shares: a fixed start date, no catchup, ``retries`` per task (a retry
    attaches to the job an earlier try started, it never starts a second one), and the template functions that
    ``planned``, ``output_of`` and ``compile_cache_of`` call."""
    args: dict[str, Any] = {"start_date": start_date, "catchup": False, "user_defined_macros": _template_macros()}
    if retries:
        args["default_args"] = {"retries": retries, "retry_delay": timedelta(seconds=10)}
    return args


@contextmanager
def trainium_dag(
    dag_id: str,
    description: str,
    *,
    tags: list[str],
    params: dict[str, Any],
    schedule: str | None = None,
    max_active_runs: int | None = None,
    retries: int = 1,
) -> Iterator[DAG]:
    """A Trainium DAG (``with kit.trainium_dag(...) as dag:``), manual (``schedule=None``) unless told: tagged
    ``trainium`` and ``tags``, with ``dag_args``. ``max_active_runs`` None keeps Airflow's default.

    ``params`` join the DAG when its block ends, after its tasks are declared: Airflow deep-copies the DAG's params
    into every operator made inside the block, a copy no run reads (a task's params are the DAG's merged with its
    own when it runs), and those copies were the largest part of parsing a shipped DAG file (``make bench-parse``).
    """
    from airflow.sdk import DAG

    kwargs: dict[str, Any] = {"description": description, "schedule": schedule, "tags": ["trainium", *tags]}
    if max_active_runs is not None:
        kwargs["max_active_runs"] = max_active_runs
    dag = DAG(dag_id=dag_id, **kwargs, **dag_args(retries=retries))
    with dag:
        yield dag
    dag.params = params  # type: ignore[assignment]  # the DAG converts a dict to a ParamsDict and validates it


def param_args(*names: str) -> list[str]:
    """Trainer flags for run params, in order: ``max_steps`` -> ``["--max-steps", "{{ params.max_steps }}"]``
    (``learning_rate`` is ``--lr``)."""
    args: list[str] = []
    for name in names:
        args += [FLAG_NAMES.get(name, "--" + name.replace("_", "-")), "{{ params." + name + " }}"]
    return args


def job_layout(
    image: str = IMAGE_FROM_PARAMS,
    *,
    single_node: bool = False,
    instance_type: str | None = "{{ params.instance_type }}",
    **extra: Any,
) -> dict[str, Any]:
    """Operator arguments that run a job where the params say: ``compute``, ``instance_type``, ``nodes``,
    ``stack``, ``image``, and the job's budget (``max_cost_usd``, ``allow_over_budget_estimate``).
    ``single_node``: one process on one node (data prep, evaluation); ``instance_type=None`` keeps the
    operator's default instance type and so its ``auto`` stack (the run's stack may not train on that type);
    ``extra`` adds or overrides (``workload="llm"``, ``env=RUNTIME_ENV``)."""
    layout: dict[str, Any] = {
        "compute": "{{ params.compute }}",
        "image": image,
        "max_cost_usd": "{{ params.max_cost_usd }}",
        "allow_over_budget_estimate": "{{ params.allow_over_budget_estimate }}",
    }
    if instance_type is not None:
        layout["instance_type"] = instance_type
        layout["stack"] = "{{ params.stack }}"
    if single_node:
        layout["distributed"] = False
    else:
        layout["nodes"] = "{{ params.nodes }}"
    return {**layout, **extra}
