"""The pieces every Trainium DAG repeats, so a DAG file reads like its pipeline diagram.

* ``templates``: ``trainium_dag``, ``dag_args``, ``param_args``: a Trainium DAG, the DAG arguments every one
  shares and trainer flags from run params; ``job_layout``, the operator arguments that put a job where the run
  params say (compute, instance type, nodes, image); ``planned(key)`` (``planned_args``: as trainer flags),
  ``output_of(task_id)``, ``compile_cache_of(task_id)``: the run plan's values, another job task's output (compile
  cache) for this run, derived from the run's identity and the DAG's layout, checked against its XCom
  (``operators.run_outputs``).
* ``plan``: the run plan the first task returns and writes as a record under the run's prefix; later tasks read
  the record, checked against the XCom.
* ``checks``: ``check_run``, which refuses a bad layout, an untrusted image or an input outside the allowed
  prefixes before anything paid starts, and the preflight for the run's layout.
* ``tasks``: ``check_params_task`` (the first task: ``check_run``, then the plan), ``has_data_task`` (ends a run
  with a clear skip when data preparation found nothing to train on), ``image_branch_task`` (builds the training
  image only for remote compute without an ``image`` param), ``compile_then_train`` (the compile step and the
  training step on the same layout, the cache wired through).
* ``gates``: ``evaluation_gate_task``, ``promote_latest``: promote a registered model only when the evaluation
  job's verdict record passed its very files (``registry.verdict``), whatever the task states say.
* ``llama``: the Llama recipe: ``image_then_data`` (the image build when needed, then ``prepare_llama_data``, the
  data job: corpus -> tokenizer + blocks at the plan's URIs), ``evaluate_llama`` (held-out loss against a
  reference; ``beats_untrained``, a pretraining gate's log line), ``register_llama_model`` (every run's model kept;
  the gate decides ``latest``), ``pretrain_plan`` (a pretraining run's URIs).
* ``helpers``: for task bodies (``trainium_config``, ``run_prefix``, ``stage_uris``, ``read_evaluation``,
  ``resolve_model``), so DAG code never reaches into the provider's internals.
* ``params``: the run params the DAGs declare, with their JSON Schema; imported on its own
  (``dag_kit.params``), since it loads the instance catalog and the backend table.

Importing this package is cheap (no boto3, torch or numpy, no backend or registry): each name loads its module on
first use (PEP 562), so a DAG file loads only the factories it declares tasks with (``make bench-parse``), and task
bodies import what they need when they run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_trainium.dag_kit.checks import check_run, local_trainer_problem, only_stack_problem, preflight
    from airflow_provider_trainium.dag_kit.gates import evaluation_gate_task, promote_latest
    from airflow_provider_trainium.dag_kit.helpers import (
        is_manual_run,
        read_evaluation,
        resolve_model,
        run_prefix,
        stage_uris,
        trainium_config,
    )
    from airflow_provider_trainium.dag_kit.llama import (
        beats_untrained,
        evaluate_llama,
        image_then_data,
        prepare_llama_data,
        pretrain_plan,
        register_llama_model,
    )
    from airflow_provider_trainium.dag_kit.plan import (
        PLAN_RECORD,
        PLAN_TASK_ID,
        PlanFunction,
        plan_record,
        plan_record_uri,
        write_plan_record,
    )
    from airflow_provider_trainium.dag_kit.tasks import (
        check_params_task,
        compile_then_train,
        has_data_task,
        image_branch_task,
    )
    from airflow_provider_trainium.dag_kit.templates import (
        FLAG_NAMES,
        IMAGE_BUILT_OR_FROM_PARAMS,
        IMAGE_FROM_PARAMS,
        RUNTIME_ENV,
        compile_cache_of,
        dag_args,
        job_layout,
        output_of,
        param_args,
        planned,
        planned_args,
        planned_training_uris,
        trainium_dag,
    )

#: Each exported name -> the module of this package that defines it.
_HOMES = {
    "FLAG_NAMES": "templates",
    "IMAGE_BUILT_OR_FROM_PARAMS": "templates",
    "IMAGE_FROM_PARAMS": "templates",
    "PLAN_RECORD": "plan",
    "PLAN_TASK_ID": "plan",
    "PlanFunction": "plan",
    "RUNTIME_ENV": "templates",
    "beats_untrained": "llama",
    "check_params_task": "tasks",
    "check_run": "checks",
    "compile_cache_of": "templates",
    "compile_then_train": "tasks",
    "dag_args": "templates",
    "evaluate_llama": "llama",
    "evaluation_gate_task": "gates",
    "has_data_task": "tasks",
    "image_branch_task": "tasks",
    "image_then_data": "llama",
    "is_manual_run": "helpers",
    "job_layout": "templates",
    "local_trainer_problem": "checks",
    "only_stack_problem": "checks",
    "output_of": "templates",
    "param_args": "templates",
    "plan_record": "plan",
    "plan_record_uri": "plan",
    "planned": "templates",
    "planned_args": "templates",
    "planned_training_uris": "templates",
    "preflight": "checks",
    "prepare_llama_data": "llama",
    "pretrain_plan": "llama",
    "promote_latest": "gates",
    "read_evaluation": "helpers",
    "register_llama_model": "llama",
    "resolve_model": "helpers",
    "run_prefix": "helpers",
    "stage_uris": "helpers",
    "trainium_config": "helpers",
    "trainium_dag": "templates",
    "write_plan_record": "plan",
}

__all__ = [
    "FLAG_NAMES",
    "IMAGE_BUILT_OR_FROM_PARAMS",
    "IMAGE_FROM_PARAMS",
    "PLAN_RECORD",
    "PLAN_TASK_ID",
    "RUNTIME_ENV",
    "PlanFunction",
    "beats_untrained",
    "check_params_task",
    "check_run",
    "compile_cache_of",
    "compile_then_train",
    "dag_args",
    "evaluate_llama",
    "evaluation_gate_task",
    "has_data_task",
    "image_branch_task",
    "image_then_data",
    "is_manual_run",
    "job_layout",
    "local_trainer_problem",
    "only_stack_problem",
    "output_of",
    "param_args",
    "plan_record",
    "plan_record_uri",
    "planned",
    "planned_args",
    "planned_training_uris",
    "preflight",
    "prepare_llama_data",
    "pretrain_plan",
    "promote_latest",
    "register_llama_model",
    "read_evaluation",
    "resolve_model",
    "run_prefix",
    "stage_uris",
    "trainium_config",
    "trainium_dag",
    "write_plan_record",
]

#: The modules of this package, reachable as attributes (``kit.params``) as when this file imported them all.
_MODULES = frozenset({*_HOMES.values(), "params"})


def __getattr__(name: str) -> Any:
    """Load the module that defines ``name`` on first use (``kit.job_layout``, ``from dag_kit import planned``)."""
    home = _HOMES.get(name)
    if home is None:
        if name not in _MODULES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")  # the import sets the attribute
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
