"""Register a trained model as an immutable registry version, and move aliases between versions.

Declaring these operators in a DAG file checks the model name and declares its asset (``model_asset``) without
loading the registry; ``registry/`` is imported when a task runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_trainium import deprecated_names
from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID
from airflow_provider_trainium.model_asset import model_asset, validate_model_name

if TYPE_CHECKING:
    from airflow.sdk import Context


def run_lineage(context: Context, image: str | None = None) -> dict[str, Any]:
    """Which DAG run and task try did this, with the run's logical date and data interval; ``image`` and its
    ``base_digest`` when the run built the training image (absent when it built none)."""
    from airflow_provider_trainium.operators.run_images import image_lineage

    ti = context["ti"]
    dag_run = context["dag_run"]

    def iso(value: Any) -> str | None:
        return value.isoformat() if value is not None else None

    return {
        "dag_id": ti.dag_id,
        "run_id": ti.run_id,
        "task_id": ti.task_id,
        "map_index": ti.map_index,
        "try_number": ti.try_number,
        "logical_date": iso(getattr(dag_run, "logical_date", None)),
        "data_interval_start": iso(getattr(dag_run, "data_interval_start", None)),
        "data_interval_end": iso(getattr(dag_run, "data_interval_end", None)),
        **image_lineage(context, context.get("dag"), image),
    }


def _actor(context: Context) -> dict[str, Any]:
    ti = context["ti"]
    return {"dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id, "try_number": ti.try_number}


def may_promote(context: Context, promote_manual_runs: bool, log: Any, promote_backfill_runs: bool = False) -> bool:
    """Scheduled runs may promote; a manual run only when the DAG's author allows it, and a backfill (whoever may
    trigger may backfill, with their own conf) only when the author allows backfills, separately. Every other run
    type (started by another DAG's operator, by an asset event, by an asset materialisation, or one Airflow adds
    later) is refused: whoever can start it chooses its conf as a manual run's trigger does."""
    run_type = str(getattr(context["dag_run"], "run_type", "") or "").rsplit(".", 1)[-1].lower()
    allowed = {"scheduled": True, "manual": promote_manual_runs, "backfill": promote_backfill_runs}
    if not allowed.get(run_type, False):
        log.info("%s run: registered, not promoted (the DAG lets only %s runs promote)", run_type or "unknown",
                 " and ".join(kind for kind, ok in allowed.items() if ok))  # fmt: skip
        return False
    return True


def evaluation_uri(context: Context, evaluation_task_id: str) -> str:
    """Where this run's evaluation task wrote its verdict: derived from the run and the DAG, checked against
    its XCom."""
    from airflow_provider_trainium.operators.run_outputs import task_output_uri

    return task_output_uri(context, evaluation_task_id)


def evaluation_job_name(context: Context, evaluation_task_id: str) -> str:
    """The name of this run's evaluation job, whose key alone seals its verdict (``registry.seal``)."""
    from airflow_provider_trainium.compute.naming import job_name

    ti = context["ti"]
    return job_name(ti.dag_id, evaluation_task_id, ti.run_id)


def require_verdict(
    context: Context,
    evaluation_task_id: str | None,
    fingerprint: str,
    trainium_conn_id: str,
    log: Any,
    must_pass: bool = True,
    holdout_task_id: str | None = None,
) -> dict[str, Any]:
    """The evaluation job's verdict for the files whose fingerprint is ``fingerprint``; AirflowFailException
    (no retry) when it is missing, judged other files or (``must_pass``) failed, whatever the task states say.
    With ``holdout_task_id``, the verdict must also name the hold-out manifest that task's job of this run sealed
    (``registry.holdout``), pass or fail: a verdict on other data says nothing about the model."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_trainium.registry.verdict import VerdictError, check_verdict, describe, read_verdict

    if not evaluation_task_id:
        raise AirflowFailException("no evaluation task named: pass evaluation_task_id, or require_evaluation=False")
    try:
        where = evaluation_uri(context, evaluation_task_id)
        stored = read_verdict(where, trainium_conn_id=trainium_conn_id)
        job = evaluation_job_name(context, evaluation_task_id)
        verdict = check_verdict(stored, fingerprint, where, job, must_pass=False)
        if holdout_task_id:
            from airflow_provider_trainium.operators.run_outputs import task_output_uri
            from airflow_provider_trainium.registry.holdout import require_holdout

            require_holdout(verdict, where, task_output_uri(context, holdout_task_id),
                            evaluation_job_name(context, holdout_task_id), holdout_task_id,
                            trainium_conn_id)  # fmt: skip
        if must_pass:
            verdict = check_verdict(stored, fingerprint, where, job, must_pass=True)
    except (VerdictError, ValueError) as err:
        raise AirflowFailException(f"refusing model files {fingerprint[:12]}...: {err}") from err
    held = f", hold-out set {str(verdict.get('holdout_fingerprint'))[:12]}..." if holdout_task_id else ""
    log.info("verdict of %s: %s (model files %s...%s)", evaluation_task_id, describe(verdict), fingerprint[:12], held)
    return verdict


class TrainiumRegisterModelOperator(BaseOperator):
    """Publish a trained model's directory as the next version of ``model_name``.

    Files are copied first and the manifest written last, so a crash leaves no half version. The same
    content registered again (a retry, or an identical re-run) returns the existing version with
    ``created: False``. The task's resolved ``params`` (DAG params, run conf, this task's params) are
    recorded in the manifest.

    Returns ``{"name", "version", "uri", "manifest_uri", "created"}`` and emits the asset
    ``x-trainium-model://<model_name>`` with that dict, the registry root and the scalar metrics as extra.

    :param model_name: registry name (``a-z 0-9 - _ .``).
    :param source_uri: directory with the trained files (``file://``, ``s3://`` or a path). Templated.
    :param artifact_root: registry root; default: the ``trainium`` connection's artifact root.
    :param metrics_file: JSON file in the source directory recorded as metrics; None to skip.
    :param dataset_uri: training data, recorded with a content hash. Templated.
    :param checkpoint_uri: checkpoint directory the run wrote, recorded for lineage. Templated.
    :param base_model: what a fine-tune started from: ``name:3`` or ``name@alias`` (pinned to the version
        it resolves to now) or any other reference (a Hugging Face id, a URI). Templated.
    :param image: training image reference; ``...@sha256:<digest>`` records the digest. Templated.
    :param aws_conn_id: AWS connection for ``s3://`` roots; default: the trainium connection's.
    :param promote_alias: alias to move to the registered version (``latest``, ``staging``...). The alias
        only moves forward: a rerun of an older run never points it back at an older version.
    :param promote_manual_runs: whether a manually triggered run may move ``promote_alias``. A DAG author's
        setting, off by default: someone who may only trigger the DAG must not decide what ``latest`` is.
    :param promote_backfill_runs: whether a backfill run may move ``promote_alias`` (off by default: whoever may
        trigger may backfill, with their own conf).
    :param evaluation_task_id: the evaluation job task whose verdict record (``registry.verdict``) must have
        passed these very files; read from its output location derived from the run, never from task states.
    :param require_evaluation: False registers without a verdict (a DAG without an evaluation). A DAG author's
        explicit choice: the default refuses a model no evaluation passed.
    :param register_failed_models: register a model whose verdict failed too (it is never promoted): for a DAG
        that keeps every run's model and lets a separate gate promote. Its verdict must still name these files.
    :param holdout_task_id: the data job task that wrote the hold-out set the evaluation judges on (with
        ``--holdout-manifest``): the verdict must name the manifest that task's job of this run sealed, pass or
        fail (``registry.holdout``); a swapped set, or a verdict naming none, registers nothing. None: no check.
    :param cost_task_id: the job task whose cost (its ``trainium_cost`` XCom) the manifest records; default:
        the nearest upstream ``TrainiumTrainingOperator`` (else the nearest ``TrainiumJobOperator``).
    """

    template_fields: Sequence[str] = (
        "source_uri",
        "artifact_root",
        "dataset_uri",
        "checkpoint_uri",
        "base_model",
        "image",
        "promote_alias",
    )
    ui_color = "#f0e4ff"

    def __init__(
        self,
        *,
        model_name: str,
        source_uri: str,
        artifact_root: str | None = None,
        metrics_file: str | None = "metrics.json",
        dataset_uri: str | None = None,
        dataset_hash_max_bytes: int = 2 * 2**30,
        checkpoint_uri: str | None = None,
        base_model: str | None = None,
        image: str | None = None,
        aws_conn_id: str | None = None,
        trainium_conn_id: str = DEFAULT_CONN_ID,
        promote_alias: str | None = None,
        promote_manual_runs: bool = False,
        promote_backfill_runs: bool = False,
        evaluation_task_id: str | None = "evaluate",
        require_evaluation: bool = True,
        register_failed_models: bool = False,
        cost_task_id: str | None = None,
        holdout_task_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.model_name = validate_model_name(model_name)
        self.cost_task_id = cost_task_id
        self.holdout_task_id = holdout_task_id
        self.promote_manual_runs = promote_manual_runs
        self.promote_backfill_runs = promote_backfill_runs
        self.evaluation_task_id = evaluation_task_id
        self.require_evaluation = require_evaluation
        self.register_failed_models = register_failed_models
        asset = model_asset(model_name)
        outlets = list(kwargs.pop("outlets", None) or [])
        if asset not in outlets:
            outlets.append(asset)
        super().__init__(outlets=outlets, **kwargs)
        self.model_asset = asset
        self.source_uri = source_uri
        self.artifact_root = artifact_root
        self.metrics_file = metrics_file
        self.dataset_uri = dataset_uri
        self.dataset_hash_max_bytes = dataset_hash_max_bytes
        self.checkpoint_uri = checkpoint_uri
        self.base_model = base_model
        self.image = image
        self.aws_conn_id = aws_conn_id
        self.trainium_conn_id = trainium_conn_id
        self.promote_alias = promote_alias
        self._registered: dict[str, Any] | None = None

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_trainium.registry.assets import event_extra
        from airflow_provider_trainium.registry.config import open_registry
        from airflow_provider_trainium.registry.names import validate_alias

        source = (self.source_uri or "").strip() if isinstance(self.source_uri, str) else None
        if not source or source == "None":
            raise ValueError(f"source_uri rendered to {self.source_uri!r}: nothing to register")
        if self.promote_alias:
            validate_alias(self.promote_alias)
        registry = open_registry(self.artifact_root, self.aws_conn_id, self.trainium_conn_id)
        verdict: dict[str, Any] | None = None
        if self.require_evaluation:
            from airflow_provider_trainium.registry import store
            from airflow_provider_trainium.registry.verdict import files_fingerprint

            fingerprint = files_fingerprint(store.open_root(source, registry.conn_id))
            verdict = require_verdict(context, self.evaluation_task_id, fingerprint, self.trainium_conn_id, self.log,
                                      must_pass=not self.register_failed_models,
                                      holdout_task_id=self.holdout_task_id)  # fmt: skip
        result = registry.register(
            self.model_name,
            source,
            metrics_file=self.metrics_file,
            params=dict(context.get("params") or {}),
            lineage=run_lineage(context, self.image or None),
            dataset_uri=self.dataset_uri or None,
            dataset_hash_max_bytes=self.dataset_hash_max_bytes,
            checkpoint_uri=self.checkpoint_uri or None,
            base_model=self.base_model or None,
            image=self.image or None,
            cost=self.run_cost(context),
        )
        mv = result.version
        if verdict is not None and mv.manifest.get("fingerprint") != verdict.get("model_fingerprint"):
            from airflow.providers.common.compat.sdk import AirflowFailException

            raise AirflowFailException(f"version {mv.version} holds other files than the evaluation judged")
        self.log.info(
            "model %s version %d %s at %s",
            mv.name,
            mv.version,
            "registered" if result.created else "exists",
            mv.uri,
        )
        passed = verdict is None or verdict.get("passed") is True  # None: the DAG registers without an evaluation
        if not passed and self.promote_alias:
            self.log.info("the evaluation failed this model: registered, not promoted")
        if passed and self.promote_alias and may_promote(context, self.promote_manual_runs, self.log,
                                                         self.promote_backfill_runs):  # fmt: skip
            state = registry.promote(
                mv.name, self.promote_alias, mv.version, moved_by=_actor(context), forward_only=True
            )
            self.log.info("alias %s@%s -> version %d", mv.name, state.alias, state.version)
        out = result.to_xcom()
        root = str(registry.root_uri)
        context["outlet_events"][self.model_asset].extra = event_extra(out, mv.metrics, root)
        self._registered = {**out, "source_uri": mv.manifest.get("source", {}).get("uri", source)}
        return out

    def cost_task(self) -> str | None:
        """The task whose cost the version records: ``cost_task_id``, else the nearest upstream trainer."""
        if self.cost_task_id or not self.has_dag():
            return self.cost_task_id
        from airflow_provider_trainium.operators.job import TrainiumJobOperator
        from airflow_provider_trainium.operators.training import TrainiumTrainingOperator

        seen: set[str] = set()
        level = list(self.upstream_list)
        fallback: str | None = None
        while level:  # breadth first: the nearest one wins
            for task in level:
                if isinstance(task, TrainiumTrainingOperator):
                    return task.task_id
                if fallback is None and isinstance(task, TrainiumJobOperator):
                    fallback = task.task_id
            seen.update(t.task_id for t in level)
            level = [u for t in level for u in t.upstream_list if u.task_id not in seen]
        return fallback

    def run_cost(self, context: Context) -> dict[str, Any] | None:
        """The ``trainium_cost`` record of the job that trained these files (None when it pushed none)."""
        task_id = self.cost_task()
        if task_id is None:
            return None
        cost = context["ti"].xcom_pull(task_ids=task_id, key="trainium_cost")
        return cost if isinstance(cost, dict) else None

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Inputs: the dataset, the checkpoint and the trained files; output: the registered version."""
        try:
            from airflow.providers.common.compat.openlineage.facet import Dataset
            from airflow.providers.openlineage.extractors import OperatorLineage
        except ImportError:  # OpenLineage provider not installed
            return None
        from airflow_provider_trainium.registry.assets import openlineage_id

        if not self._registered:
            return OperatorLineage()
        inputs = [self.dataset_uri, self.checkpoint_uri, self._registered["source_uri"]]
        datasets = [Dataset(*openlineage_id(uri)) for uri in inputs if uri]
        output = Dataset(*openlineage_id(self._registered["uri"]))
        return OperatorLineage(inputs=datasets, outputs=[output])


class TrainiumPromoteModelAliasOperator(BaseOperator):
    """Point an alias (``production``, ``staging``...) of a model at a version.

    The move is atomic and recorded in the alias history; a version that does not exist is rejected.
    Moving an alias to the version it already points at changes nothing, so retries are harmless.

    :param version: version number, or the XCom result of ``TrainiumRegisterModelOperator``. Templated.
    :param forward_only: never move the alias to a version older than the one it points at (for ``latest``:
        a rerun of an old interval must not move it back). Off for deliberate rollbacks.
    :param promote_manual_runs: whether a manually triggered run may move the alias (a DAG author's setting).
    :param promote_backfill_runs: whether a backfill run may move the alias (off by default).
    :param evaluation_task_id: the evaluation job task of this run whose verdict must have passed the version's
        very files (its manifest fingerprint).
    :param require_evaluation: False moves the alias without a verdict (a rollback, a DAG without an
        evaluation): the DAG author's explicit choice.
    :param holdout_task_id: the data job task whose sealed hold-out manifest the verdict must name
        (``TrainiumRegisterModelOperator``'s parameter of that name). None: no check.
    """

    template_fields: Sequence[str] = ("version", "alias", "reason", "artifact_root")

    def __init__(
        self,
        *,
        model_name: str,
        alias: str,
        version: int | str | dict[str, Any],
        reason: str | None = None,
        artifact_root: str | None = None,
        aws_conn_id: str | None = None,
        trainium_conn_id: str = DEFAULT_CONN_ID,
        forward_only: bool = False,
        promote_manual_runs: bool = True,
        promote_backfill_runs: bool = False,
        evaluation_task_id: str | None = "evaluate",
        require_evaluation: bool = True,
        holdout_task_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.holdout_task_id = holdout_task_id
        self.model_name = validate_model_name(model_name)
        self.forward_only = forward_only
        self.promote_manual_runs = promote_manual_runs
        self.promote_backfill_runs = promote_backfill_runs
        self.evaluation_task_id = evaluation_task_id
        self.require_evaluation = require_evaluation
        self.alias = alias
        self.version = version
        self.reason = reason
        self.artifact_root = artifact_root
        self.aws_conn_id = aws_conn_id
        self.trainium_conn_id = trainium_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_trainium.registry.config import open_registry
        from airflow_provider_trainium.registry.names import validate_alias, validate_version

        version = self.version["version"] if isinstance(self.version, dict) else self.version
        version = validate_version(version)
        validate_alias(self.alias)
        registry = open_registry(self.artifact_root, self.aws_conn_id, self.trainium_conn_id)
        if not may_promote(context, self.promote_manual_runs, self.log, self.promote_backfill_runs):
            from airflow.providers.common.compat.sdk import AirflowSkipException

            raise AirflowSkipException("runs of this type do not move this DAG's aliases")
        if self.require_evaluation:
            fingerprint = str(registry.get_version(self.model_name, version).manifest.get("fingerprint"))
            require_verdict(context, self.evaluation_task_id, fingerprint, self.trainium_conn_id, self.log,
                            holdout_task_id=self.holdout_task_id)  # fmt: skip
        state = registry.promote(
            self.model_name,
            self.alias,
            version,
            moved_by=_actor(context),
            reason=self.reason,
            forward_only=self.forward_only,
        )
        return state.to_dict()


def __getattr__(name: str) -> Any:
    """The former class names (:mod:`airflow_provider_trainium.deprecated_names`)."""
    return deprecated_names.resolve(__name__, name)
