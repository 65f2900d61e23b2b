"""The pieces every Trainium DAG repeats, so a DAG file reads like its pipeline diagram.

* ``templates``: ``dag_args``, ``param_args``, the DAG arguments every Trainium DAG shares and trainer flags from
  run params; ``job_layout``, the operator arguments that put a job where the run params say (compute, instance
  type, nodes, image); ``planned(key)``, ``output_of(task_id)``, ``compile_cache_of(task_id)``: the run plan's
  values, another job task's output (compile cache) for this run, derived from the run's identity and the DAG's
  layout, checked against its XCom (``operators.run_outputs``).
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
* ``llama``: ``prepare_llama_data``, the Llama data job (corpus -> tokenizer + blocks) at the plan's URIs.
* ``helpers``: for task bodies (``trainium_config``, ``run_prefix``, ``stage_uris``, ``read_evaluation``,
  ``resolve_model``), so DAG code never reaches into the provider's internals.
* ``params``: the run params the DAGs declare, with their JSON Schema; imported on its own
  (``dag_kit.params``), since it loads the instance catalog and the backend table.

Importing this package is cheap (no boto3, torch or numpy, no backend or registry): task bodies import what they
need when they run.
"""

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
from airflow_provider_trainium.dag_kit.llama import prepare_llama_data
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
    IMAGE_FROM_PARAMS,
    RUNTIME_ENV,
    compile_cache_of,
    dag_args,
    job_layout,
    output_of,
    param_args,
    planned,
    planned_training_uris,
)

__all__ = [
    "FLAG_NAMES",
    "IMAGE_FROM_PARAMS",
    "PLAN_RECORD",
    "PLAN_TASK_ID",
    "RUNTIME_ENV",
    "PlanFunction",
    "check_params_task",
    "check_run",
    "compile_cache_of",
    "compile_then_train",
    "dag_args",
    "evaluation_gate_task",
    "has_data_task",
    "image_branch_task",
    "is_manual_run",
    "job_layout",
    "local_trainer_problem",
    "only_stack_problem",
    "output_of",
    "param_args",
    "plan_record",
    "plan_record_uri",
    "planned",
    "planned_training_uris",
    "preflight",
    "prepare_llama_data",
    "promote_latest",
    "read_evaluation",
    "resolve_model",
    "run_prefix",
    "stage_uris",
    "trainium_config",
    "write_plan_record",
]
