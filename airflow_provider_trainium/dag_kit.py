"""The pieces every Trainium DAG repeats, so a DAG file reads like its pipeline diagram.

* ``dag_args``, ``param_args``: the DAG arguments every Trainium DAG shares; trainer flags from run params.
* ``job_layout``: the operator arguments that put a job where the run params say (compute, instance type,
  nodes, image), as templates.
* ``check_params_task``: the first task. It refuses a bad layout, an untrusted image or an input outside the
  allowed prefixes before anything paid starts, and may return the run's plan (its URIs), which it also writes
  as a record under the run's prefix; later tasks read it with ``planned(key)`` (from the record, checked
  against the XCom).
* ``output_of(task_id)``, ``compile_cache_of(task_id)``: another job task's output (compile cache) for this run,
  derived from the run's identity and the DAG's layout, checked against its XCom (``operators.run_outputs``).
* ``has_data_task``: ends a run with a clear skip when data preparation found nothing to train on.
* ``evaluation_gate_task``, ``promote_latest``: promote a registered model only when the evaluation job's
  verdict record passed its very files (``registry.verdict``), whatever the task states say.
* ``image_branch_task``: builds the training image only for remote compute without an ``image`` param.
* ``compile_then_train``: the compile step and the training step on the same layout, the cache wired through.
* ``prepare_llama_data``: the Llama data job (corpus -> tokenizer + blocks) at the plan's URIs.
* Helpers for task bodies (``trainium_config``, ``run_prefix``, ``stage_uris``, ``read_evaluation``,
  ``resolve_model``), so DAG code never reaches into the provider's internals.

Importing this module is cheap (no boto3, torch or numpy): task bodies import what they need when they run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import task

from airflow_provider_trainium.hooks.trainium import DEFAULT_CONN_ID
from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow.sdk.definitions.xcom_arg import XComArg

    from airflow_provider_trainium.hooks.trainium import TrainiumConfig
    from airflow_provider_trainium.operators.compile import TrainiumCompileOperator
    from airflow_provider_trainium.operators.job import TrainiumJobOperator
    from airflow_provider_trainium.operators.registry import TrainiumPromoteModelAliasOperator
    from airflow_provider_trainium.operators.training import TrainiumTrainingOperator
    from airflow_provider_trainium.registry import ModelVersion

#: The first task's id; its return value is the run plan that ``planned`` reads.
PLAN_TASK_ID = "check_params"
#: The run's ``image`` param, or none (the connection's image).
IMAGE_FROM_PARAMS = "{{ params.image or '' }}"
#: Passes the ``runtime`` param (``runtime_param``) to the trainer; ``auto`` lets it choose.
RUNTIME_ENV = {boundary.ENV_RUNTIME: "{{ '' if params.runtime == 'auto' else params.runtime }}"}

#: Trainer flags whose name is not the param's name with dashes.
FLAG_NAMES = {"learning_rate": "--lr"}

PlanFunction = Callable[[Mapping[str, Any], "TrainiumConfig", Mapping[str, Any]], dict[str, Any]]


#: The plan record the first task writes under its own place in the run's prefix.
PLAN_RECORD = "plan.json"


def planned(key: str, task_id: str = PLAN_TASK_ID) -> str:
    """A template for one value of the run plan that the ``task_id`` task wrote (``plan_record``)."""
    return "{{ trainium_plan('" + task_id + "')['" + key + "'] }}"


def output_of(task_id: str) -> str:
    """A template for the output URI of this run's ``task_id`` job task, derived as that task chose it."""
    return "{{ trainium_output('" + task_id + "') }}"


def compile_cache_of(task_id: str) -> str:
    """A template for the compile cache this run's ``task_id`` compile task filled, derived as it chose it."""
    return "{{ trainium_compile_cache('" + task_id + "') }}"


def plan_record_uri(artifact_root: str, dag_id: str, run_id: str, task_id: str = PLAN_TASK_ID) -> str:
    """Where the plan task of a run writes its plan: its own place under the run's prefix."""
    from airflow_provider_trainium.operators.run_outputs import instance_prefix

    return f"{instance_prefix(artifact_root, 'runs', dag_id, run_id, task_id)}/{PLAN_RECORD}"


def plan_record(context: Mapping[str, Any], task_id: str = PLAN_TASK_ID) -> dict[str, Any]:
    """This run's plan as the plan task wrote it under the run's prefix; an XCom that says otherwise fails the
    task, naming both (XComs can be edited, the record only by Airflow's own tasks)."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_trainium import artifacts

    ti = context["ti"]
    uri = plan_record_uri(trainium_config().artifact_root, ti.dag_id, ti.run_id, task_id)
    record = artifacts.read_json(uri, missing_ok=True)
    if not isinstance(record, dict):
        raise AirflowFailException(f"no plan record at {uri}: the {task_id!r} task of this run has not planned it")
    xcom = ti.xcom_pull(task_ids=task_id)
    if xcom is not None and xcom != record:
        pushed = xcom if isinstance(xcom, dict) else {}
        changed = sorted(k for k in {*record, *pushed} if pushed.get(k) != record.get(k))
        says = {k: pushed.get(k) for k in changed} if isinstance(xcom, dict) else xcom
        raise AirflowFailException(
            f"the XCom of task {task_id!r} disagrees with the plan record at {uri}: XCom {says!r}, record "
            f"{ {k: record.get(k) for k in changed}!r}; refusing the XCom (XComs can be edited)"
        )
    return record


def _fail_on_mismatch(call: Callable[[], Any]) -> Any:
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_trainium.operators.run_outputs import XComMismatchError

    try:
        return call()
    except XComMismatchError as err:
        raise AirflowFailException(str(err)) from err


def _template_macros() -> dict[str, Any]:
    """The functions ``planned``, ``output_of`` and ``compile_cache_of`` templates call (``dag_args`` adds them
    to the DAG's ``user_defined_macros``); each gets the template's context."""
    from jinja2 import pass_context

    @pass_context
    def trainium_plan(ctx: Any, task_id: str = PLAN_TASK_ID) -> dict[str, Any]:
        return plan_record(ctx.get_all(), task_id)

    @pass_context
    def trainium_output(ctx: Any, task_id: str) -> str:
        from airflow_provider_trainium.operators.run_outputs import task_output_uri

        return _fail_on_mismatch(lambda: task_output_uri(ctx.get_all(), task_id))

    @pass_context
    def trainium_compile_cache(ctx: Any, task_id: str) -> str:
        from airflow_provider_trainium.operators.run_outputs import task_cache_uri

        return _fail_on_mismatch(lambda: task_cache_uri(ctx.get_all(), task_id))

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


# -- helpers for task bodies (they run in the worker) ------------------------------------------------


def trainium_config(trainium_conn_id: str = DEFAULT_CONN_ID) -> TrainiumConfig:
    """The ``trainium`` connection's settings (local defaults without one)."""
    from airflow_provider_trainium.hooks.trainium import TrainiumHook

    return TrainiumHook(trainium_conn_id).get_config()


def check_run(
    params: Mapping[str, Any],
    *,
    entry_point: str,
    inputs: Iterable[str] = (),
    trainium_conn_id: str = DEFAULT_CONN_ID,
    only_stack: str | None = None,
) -> TrainiumConfig:
    """Fail the task (no retry) for an untrusted ``image``, an input param outside the allowed prefixes, a
    layout the instance type cannot hold (``tensor_parallel_size`` counts when the DAG has it), a ``stack`` the
    instance family cannot train (or, with ``only_stack``, any other stack than the one the entry point runs
    on), or any error of ``airflow trainium preflight`` for the layout (its AWS checks run only for remote
    compute)."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_trainium.neuron.releases import resolve_stack
    from airflow_provider_trainium.neuron.spec import check_layout
    from airflow_provider_trainium.params import check_image_param, check_input_param

    config = trainium_config(trainium_conn_id)
    check_image_param(params.get("image"), config)
    for name in inputs:
        check_input_param(name, params.get(name), config)
    if only_stack is not None:
        problem = only_stack_problem(entry_point, only_stack, params.get("stack"), str(params["instance_type"]))
        if problem:
            raise AirflowFailException(problem)
    try:
        stack = resolve_stack(str(params.get("stack") or "auto"), str(params["instance_type"]))
        check_layout(
            params["instance_type"],
            int(params["nodes"]),
            tensor_parallel_size=int(params.get("tensor_parallel_size") or 1),
            entry_point=entry_point,
            stack=stack,
        )
    except ValueError as err:  # JobSpecError included
        raise AirflowFailException(str(err)) from err
    local_problem = local_trainer_problem(config, params, entry_point, stack)
    if local_problem:
        raise AirflowFailException(local_problem)
    preflight(config, params)
    return config


def local_trainer_problem(
    config: TrainiumConfig, params: Mapping[str, Any], entry_point: str, stack: str
) -> str | None:
    """On local compute, a worker without the stack's trainer extra (``compute.local.extras``): refused here,
    before data prep spends a try on ``No module named ...``."""
    from airflow_provider_trainium.compute.backends import resolve_compute
    from airflow_provider_trainium.compute.local.extras import missing_trainer_extra

    try:
        compute = resolve_compute(str(params.get("compute") or "auto"), config, int(params["nodes"]))
    except ValueError:
        return None  # the preflight names a compute it does not know
    return missing_trainer_extra(entry_point, stack) if compute == "local" else None


def only_stack_problem(entry_point: str, only: str, stack: str | None, instance_type: str) -> str | None:
    """Why a run of ``entry_point``, which runs on stack ``only`` alone, cannot run with ``stack`` on
    ``instance_type``; names the families to choose instead of the other stack ``stack_problem`` would suggest."""
    from airflow_provider_trainium.neuron.releases import STACK_AUTO, auto_stack, family, stack_problem, table

    chosen = auto_stack(instance_type) if stack in (None, "", STACK_AUTO) else str(stack)
    trains = sorted(
        {f for r in table().releases.values() if r.stack == only and r.offers_training for f in r.training_families}
    )
    fix = f"{entry_point} runs on stack {only!r} only: choose an instance type of {', '.join(trains)}"
    if chosen != only:
        return f"stack {stack!r} is {chosen!r} on {family(instance_type)} ({instance_type}); {fix}"
    if stack_problem(only, instance_type):
        return f"stack {only!r} does not train on {family(instance_type)} ({instance_type}); {fix}"
    return None


def preflight(config: TrainiumConfig, params: Mapping[str, Any]) -> None:
    """``airflow trainium preflight`` for the run's layout: fail on any error, log each warning. Only errors
    because AWS did not answer (throttled, 5xx) leave the task to its retries; any other fails it for good."""
    import logging

    from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

    from airflow_provider_trainium.preflight import errors, run_preflight

    results = run_preflight(
        config,
        instance_type=str(params["instance_type"]),
        nodes=int(params["nodes"]),
        compute=str(params.get("compute") or "auto"),
        image=params.get("image") or None,
        stack=str(params.get("stack") or "auto"),
        capacity_reservation=params.get("capacity_reservation") or None,
    )
    log = logging.getLogger(__name__)
    for result in results:
        if result.status == "warning":
            log.warning("preflight %s: %s", result.name, result.reason)
    failed = errors(results)
    if failed:
        message = "preflight failed (`airflow trainium preflight` shows every check): " + "; ".join(
            f"{r.name}: {r.reason}" for r in failed
        )
        raise (AirflowException if all(r.transient for r in failed) else AirflowFailException)(message)


def run_prefix(config: TrainiumConfig, *parts: str, run_id: str | None = None) -> str:
    """``<artifact root>/<parts...>[/<run key>]``: where one run's artifacts live (run key: safe and unique)."""
    from airflow_provider_trainium.compute.naming import run_key

    tail = [run_key(run_id)] if run_id is not None else []
    return "/".join([config.artifact_root.rstrip("/"), *parts, *tail])


def stage_uris(prefix: str) -> dict[str, str]:
    """The URIs of a training run's stages under ``prefix``: data, checkpoints, model, evaluation."""
    return {
        "data_uri": f"{prefix}/data",
        "checkpoint_uri": f"{prefix}/checkpoints",
        "model_uri": f"{prefix}/model",
        "eval_uri": f"{prefix}/evaluation",
    }


def planned_training_uris(task_id: str = PLAN_TASK_ID) -> dict[str, str]:
    """The training step's ``output_uri`` and ``checkpoint_uri`` from a plan laid out with ``stage_uris``."""
    return {"output_uri": planned("model_uri", task_id), "checkpoint_uri": planned("checkpoint_uri", task_id)}


def read_evaluation(context: Mapping[str, Any], evaluation_task_id: str = "evaluate") -> dict[str, Any]:
    """The evaluation job's ``evaluation.json`` (its numbers, for the log) under its output location derived for
    this run, read with the connection's credentials."""
    from airflow_provider_trainium import artifacts
    from airflow_provider_trainium.operators.run_outputs import task_output_uri

    where = _fail_on_mismatch(lambda: task_output_uri(context, evaluation_task_id))
    return artifacts.read_json(f"{where.rstrip('/')}/{boundary.EVALUATION_FILE}")


def resolve_model(
    ref: str, *, missing_ok: bool = False, trainium_conn_id: str = DEFAULT_CONN_ID
) -> ModelVersion | None:
    """A registered model version (``name@alias`` or ``name:version``), checked against its manifest.

    Raises the registry's ``NotFoundError`` (or returns None with ``missing_ok``) and ``IntegrityError``.
    """
    from airflow_provider_trainium.registry import NotFoundError
    from airflow_provider_trainium.registry.config import open_registry

    try:
        return open_registry(trainium_conn_id=trainium_conn_id).resolve(ref)
    except NotFoundError:
        if missing_ok:
            return None
        raise


def is_manual_run(context: Mapping[str, Any]) -> bool:
    """Whether a person triggered this run directly (not the scheduler or a backfill)."""
    run_type = str(getattr(context["dag_run"], "run_type", "")).rsplit(".", 1)[-1].lower()
    return run_type == "manual"


# -- task factories ----------------------------------------------------------------------------------


def check_params_task(
    entry_point: str,
    *,
    inputs: Iterable[str] = (),
    plan: PlanFunction | None = None,
    task_id: str = PLAN_TASK_ID,
    trainium_conn_id: str = DEFAULT_CONN_ID,
    only_stack: str | None = None,
) -> XComArg:
    """The DAG's first task: ``check_run``, then ``plan(params, config, context)`` when given (its dict is the
    task's return value, read downstream with ``planned``). ``only_stack``: the one stack the entry point runs
    on."""
    inputs = tuple(inputs)

    @task(task_id=task_id)
    def check_params(params: dict | None = None, **context: Any) -> dict[str, Any] | None:
        config = check_run(
            params or {},
            entry_point=entry_point,
            inputs=inputs,
            trainium_conn_id=trainium_conn_id,
            only_stack=only_stack,
        )
        if not plan:
            return None
        planned_uris = plan(params or {}, config, context)
        write_plan_record(context, config, planned_uris, task_id)
        return planned_uris

    check_params.__doc__ = f"Refuse a bad layout, image or input for {entry_point} before anything starts."
    return check_params()


def write_plan_record(
    context: Mapping[str, Any], config: TrainiumConfig, plan: Mapping[str, Any], task_id: str = PLAN_TASK_ID
) -> str:
    """Write the run's plan to ``plan_record_uri``; later tasks read it there (``plan_record``), not from XCom."""
    from airflow_provider_trainium import artifacts
    from airflow_provider_trainium.registry import store

    ti = context["ti"]
    uri = plan_record_uri(config.artifact_root, ti.dag_id, ti.run_id, task_id)
    store.write(artifacts.open_path(uri), store.dump_json(dict(plan)))
    return uri


def has_data_task(
    plan: XComArg, *, skip_message: str = "SKIP: nothing to train on: {reason}", task_id: str = "has_data"
) -> XComArg:
    """Short-circuits the rest of the run when ``<plan data_uri>/index.json`` says data prep skipped.

    ``skip_message`` is formatted with the plan's keys and ``reason``; the malformed records are printed.
    """

    @task.short_circuit(task_id=task_id)
    def has_data(plan: dict[str, Any], **context: Any) -> bool:
        from airflow_provider_trainium import artifacts

        plan = plan_record(context)
        index = artifacts.read_json(f"{plan['data_uri'].rstrip('/')}/index.json")
        if index.get("skipped"):
            print(skip_message.format(**plan, reason=index.get("reason")))
            return False
        print(f"{index['records']} records, {index['malformed_count']} malformed (skipped): {index['malformed'][:20]}")
        return True

    return has_data(plan)


def evaluation_gate_task(
    plan: XComArg,
    *,
    describe: Callable[[dict[str, Any], dict[str, Any], Any], str],
    registered: XComArg | None = None,
    task_id: str = "passes_gate",
    evaluation_task_id: str = "evaluate",
) -> XComArg:
    """Short-circuits promotion unless the evaluation job's verdict record (derived for this run, not a task state)
    says it passed; prints ``describe(evaluation, plan, registered)`` so the log says why (``registered``: the
    register task's value). ``promote_latest`` checks the verdict against the version's files again."""

    @task.short_circuit(task_id=task_id)
    def gate(plan: dict[str, Any], registered: Any = None, **context: Any) -> bool:
        from airflow_provider_trainium.operators.registry import evaluation_uri
        from airflow_provider_trainium.registry.verdict import describe as verdict_line
        from airflow_provider_trainium.registry.verdict import read_verdict

        plan = plan_record(context)
        verdict = read_verdict(_fail_on_mismatch(lambda: evaluation_uri(context, evaluation_task_id)))
        if not isinstance(verdict, dict):
            print(f"no verdict from {evaluation_task_id!r}: nothing to promote")
            return False
        print(describe(read_evaluation(context, evaluation_task_id), plan, registered))
        print("verdict:", verdict_line(verdict))
        return verdict.get("passed") is True

    return gate(plan, registered)


def promote_latest(
    model_name: str,
    *,
    reason: str,
    promote_manual_runs: bool,
    promote_backfill_runs: bool = False,
    register_task_id: str = "register",
    evaluation_task_id: str = "evaluate",
) -> TrainiumPromoteModelAliasOperator:
    """Moves ``latest`` to the version the register task returned, forward only (rerunning an old interval never
    moves it back), and only when the ``evaluation_task_id`` verdict passed that version's files;
    ``promote_manual_runs``/``promote_backfill_runs`` say whether manual/backfill runs may move it."""
    from airflow_provider_trainium.operators.registry import TrainiumPromoteModelAliasOperator

    return TrainiumPromoteModelAliasOperator(
        task_id="promote_latest",
        model_name=model_name,
        alias="latest",
        version="{{ ti.xcom_pull(task_ids='" + register_task_id + "')['version'] }}",
        reason=reason,
        forward_only=True,
        promote_manual_runs=promote_manual_runs,
        promote_backfill_runs=promote_backfill_runs,
        evaluation_task_id=evaluation_task_id,
    )


def image_branch_task(*, build_task_id: str, skip_to: str, task_id: str = "image_needed") -> XComArg:
    """Branches to ``build_task_id`` for remote compute without an ``image`` param, else to ``skip_to``."""

    @task.branch(task_id=task_id)
    def image_needed(params: dict | None = None) -> str:
        from airflow_provider_trainium.compute.backends import resolve_compute

        params = params or {}
        compute = resolve_compute(params["compute"], trainium_config(), int(params["nodes"]))
        return skip_to if params.get("image") or compute == "local" else build_task_id

    return image_needed()


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


def compile_then_train(
    *,
    entry_point: str,
    job_args: list[str],
    layout: Mapping[str, Any],
    train_task_id: str = "train",
    compile_task_id: str = "compile",
    trial_steps: int = 10,
    cache_key_extra: dict[str, Any] | None = None,
    **train_kwargs: Any,
) -> tuple[TrainiumCompileOperator, TrainiumTrainingOperator]:
    """The compile step (a short trial that fills the compile cache) and the training job on the same layout
    and arguments, so the cache key matches; training reads the cache the compile step returned."""
    from airflow_provider_trainium.operators.compile import TrainiumCompileOperator
    from airflow_provider_trainium.operators.training import TrainiumTrainingOperator

    compile_op = TrainiumCompileOperator(
        task_id=compile_task_id,
        entry_point=entry_point,
        job_args=job_args,
        trial_steps=trial_steps,
        **({"cache_key_extra": cache_key_extra} if cache_key_extra else {}),
        **layout,
    )
    train = TrainiumTrainingOperator(
        task_id=train_task_id,
        entry_point=entry_point,
        job_args=job_args,
        compile_cache_uri=compile_cache_of(compile_task_id),
        **layout,
        **train_kwargs,
    )
    compile_op >> train
    return compile_op, train
