"""``TrainiumCompileOperator``: fill the persistent compilation cache before the paid training run.

On Trainium the training command runs under ``neuron_parallel_compile`` for a few steps: it extracts the
XLA graphs and compiles them in parallel into the cache at ``compile_cache_uri`` (``s3://`` works). On
local compute the same trial runs on torch-xla CPU with its persistent cache. The cache key covers the
graphs, so the trial must use the training run's batch size, parallel layout and node count: pass the
same ``job_args``, ``instance_type``, ``nodes`` and ``processes_per_node`` as the training task.

On the native stack (TorchNeuron) there is no ``neuron_parallel_compile``: the same command's ``--compile-only``
trial runs the real steps, so ``torch.compile`` (and TorchNeuron's eager mode) fill their own persistent cache,
which the trainer points under the same ``compile_cache_uri`` (``<uri>/native/neff``; on a CPU, inductor's
cache at ``<uri>/native/inductor``, the stand-in the local tests warm). That cache is a directory: with an
``s3://`` cache the trial warms the node it ran on only (docs/native.md).

A user's own command, script or module (``command=``, ``script=``, an entry point outside ``trainer.*``) runs
unchanged: on the XLA stack the backend wraps it in ``neuron_parallel_compile`` as it wraps the project's trainer,
and nothing is added to its arguments unless the task says how the user's program is bounded:
``trial_steps_arg="--max_steps"`` appends ``--max_steps N`` (an arg ending in ``=``, such as Hydra's
``trainer.max_steps=``, becomes one word ``trainer.max_steps=N``) and ``trial_steps_env="MAX_STEPS"`` sets that
variable to ``N``. Without either the program runs as long as it runs: bound it yourself (docs/byo-compile.md). Its
key also covers the command and the code bundle, and leaves the named step argument out. A user's program writes
no ``metrics.json`` (unless it puts one in its output folder): the key is recorded without metrics.

After a successful trial the operator records the cache key (compiler version, flags, graph-shaping
arguments, layout; see :mod:`airflow_provider_trainium.neuron.compile_key`) next to the cache, and the cache's
entries with that key in the cache's manifest, where only Airflow writes (``compile_manifest``). A later run with
the same key skips the trial (``skip_if_cached``) only when the manifest names the key and no entry changed or
went missing since: a key record alone is a claim any job could have written. A changed entry fails the task (a
trial would reuse it); a missing one the trial compiles again.

The key's rules (``neuron.compile_key``), the job spec and the artifact helpers are imported by the methods that
use them when a task runs: a DAG file that declares a compile task loads the operator class only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk import Context

from airflow_provider_trainium import deprecated_names
from airflow_provider_trainium.operators.training import TrainiumTrainingOperator
from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow_provider_trainium.compute.base import NEURON_PARALLEL_COMPILE, ComputeBackend, JobHandle
    from airflow_provider_trainium.compute.local.backend import local_compiler_version
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig
    from airflow_provider_trainium.neuron.spec import JobSpec

__all__ = [
    "NEURON_PARALLEL_COMPILE",
    "TrainiumCompileOperator",
    "default_compile_cache_uri",
    "local_compiler_version",
    "read_key_record",
    "write_key_record",
]

#: Names this module re-exports from ``compute/``, imported on first use: a DAG file that declares a compile task
#: loads no backend.
_FROM_COMPUTE = {
    "NEURON_PARALLEL_COMPILE": "airflow_provider_trainium.compute.base",
    "local_compiler_version": "airflow_provider_trainium.compute.local.backend",
}


def __getattr__(name: str) -> Any:
    if name in _FROM_COMPUTE:
        import importlib

        return getattr(importlib.import_module(_FROM_COMPUTE[name]), name)
    return deprecated_names.resolve(__name__, name)


def read_key_record(compile_cache_uri: str, key: str, aws_conn_id: str | None = None) -> dict[str, Any] | None:
    """The record a finished compilation left for ``key``, or ``None``; ``s3://`` through ``aws_conn_id``
    (default: the trainium connection's)."""
    from airflow_provider_trainium import artifacts
    from airflow_provider_trainium.neuron.compile_key import key_record_uri

    return artifacts.read_json(key_record_uri(compile_cache_uri, key), missing_ok=True, aws_conn_id=aws_conn_id)


def write_key_record(compile_cache_uri: str, key: str, record: Mapping[str, Any], aws_conn_id: str | None) -> None:
    from airflow_provider_trainium.compile_manifest import write_json
    from airflow_provider_trainium.neuron.compile_key import key_record_uri

    write_json(key_record_uri(compile_cache_uri, key), record, aws_conn_id)


class TrainiumCompileOperator(TrainiumTrainingOperator):
    """Run the training command as a short trial that fills the compile cache; returns the compile metrics.

    The project's entry points (``trainer.*``) get ``--compile-only --max-steps N``; a user's command, script or
    module gets only what ``trial_steps_arg`` / ``trial_steps_env`` ask for (the module docstring says why). Returns
    ``{"compile_cache_uri", "cache_key", "skipped", ...trial metrics}`` (no metrics for a user's program that
    writes no ``metrics.json``).

    :param compile_cache_uri: the cache to fill; default ``<artifact_root>/compile-cache/<dag_id>``.
    :param trial_steps: steps of the trial (neuron_parallel_compile needs 10-15 on Trainium).
    :param trial_steps_arg: a user's program only: the argument that bounds its steps, appended as
        ``<arg> N`` (``<arg>N`` when it ends in ``=``). None: no argument is added.
    :param trial_steps_env: a user's program only: an environment variable set to ``N`` for the trial.
    :param skip_if_cached: skip the trial when the cache already records this run's key.
    :param compiler_version: part of the key; default: the image reference on ECS/Batch (it pins the
        Neuron SDK) and, on local compute, the installed torch-xla (XLA stack) or torch and torch-neuronx
        (native stack). Templated.
    :param cache_key_extra: more inputs for the key (e.g. the vocabulary size when the data decides it).
    """

    template_fields: Sequence[str] = (*TrainiumTrainingOperator.template_fields, "compiler_version", "cache_key_extra")
    #: the trial compiles a removed entry again; a changed one it would reuse, so that is still refused
    removed_cache_entries_ok = True

    def __init__(
        self,
        *,
        trial_steps: int = 10,
        trial_steps_arg: str | None = None,
        trial_steps_env: str | None = None,
        skip_if_cached: bool = True,
        compiler_version: str | None = None,
        cache_key_extra: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.trial_steps = trial_steps
        self.trial_steps_arg = trial_steps_arg or None
        self.trial_steps_env = trial_steps_env or None
        self._check_trial_bounds()
        self.skip_if_cached = skip_if_cached
        self.compiler_version = compiler_version
        self.cache_key_extra = cache_key_extra
        self._compiled: dict[str, Any] | None = None

    # -- the trial's spec (built fresh each try; the operator's own fields are never changed) ---------------
    def cache_uri(self, context: Context, config: TrainiumConfig) -> str:
        return self.compile_cache_uri or default_compile_cache_uri(config, context["ti"].dag_id)

    @property
    def runs_project_trainer(self) -> bool:
        """The project's own entry points (``trainium_trainer.*``), which take ``--compile-only --max-steps``;
        anything else is a user's program, run unchanged (the rule ``JobSpec.runs_user_code`` applies)."""
        from airflow_provider_trainium.neuron.spec import runs_user_code

        return not runs_user_code(self.command, self.entry_point)

    def _check_trial_bounds(self) -> None:
        """Bad trial bounds fail when the DAG is parsed, not after a paid job started."""
        if (self.trial_steps_arg or self.trial_steps_env) and self.runs_project_trainer:
            raise ValueError(
                f"trial_steps_arg and trial_steps_env bound a user's program; {self.entry_point} is the project's "
                "trainer, whose trial is --compile-only --max-steps trial_steps"
            )
        if self.trial_steps_arg is not None and not self.trial_steps_arg.strip():
            raise ValueError("trial_steps_arg must name an argument, e.g. '--max_steps'")
        if self.trial_steps_env is not None:
            from airflow_provider_trainium.neuron.spec import env_name_problem  # only then: parse time stays light

            problem = env_name_problem(self.trial_steps_env, user=True)
            if problem:
                raise ValueError(f"trial_steps_env: {problem}")

    def trial_words(self) -> list[str]:
        """What bounds the trial on the command line: the project's flags, or the user's named argument, or nothing."""
        steps = str(self.trial_steps)
        if self.runs_project_trainer:
            return ["--compile-only", "--max-steps", steps]
        if self.trial_steps_arg is None:
            return []
        arg = self.trial_steps_arg
        return [arg + steps] if arg.endswith("=") else [arg, steps]

    def job_arguments(self) -> list[str]:
        return [*super().job_arguments(), *self.trial_words()]

    def wrapper(self, backend: ComputeBackend) -> tuple[str, ...]:
        return backend.compile_wrapper()

    def build_spec(self, context: Context, config: TrainiumConfig, backend: ComputeBackend) -> JobSpec:
        spec = super().build_spec(context, config, backend)
        # neuron_parallel_compile is the XLA stack's tool; on the native stack torch.compile fills its own cache
        wrapper = () if spec.stack == boundary.STACK_NATIVE else spec.wrapper
        env = dict(spec.env)
        if self.trial_steps_env and not self.runs_project_trainer:
            env[self.trial_steps_env] = str(self.trial_steps)  # the trial's bound wins over the task's own env
        return spec.with_changes(output_uri=f"{spec.output_uri}/compile", wrapper=wrapper, env=env).validate()

    # -- the cache key ------------------------------------------------------------------------------
    def key_for(self, spec: JobSpec, backend: ComputeBackend) -> tuple[str, dict[str, Any]]:
        """The key of this trial: what the backend really runs (a local machine caps processes per node).

        On the native stack a backend that runs the image runs it on Trainium (``neuron`` backend, the image
        pins TorchNeuron); local compute compiles with what this machine has installed.
        """
        from airflow_provider_trainium.neuron.compile_key import (
            cache_key,
            key_inputs,
            local_native_compile_backend,
            native_compiler_version,
        )

        native, on_trainium = spec.stack == boundary.STACK_NATIVE, backend.runs_image
        default = native_compiler_version() if native and not on_trainium else backend.compiler_version(spec)
        compile_backend = "neuron" if on_trainium or not native else local_native_compile_backend()
        per_node = backend.runs_as(spec).nproc_per_node
        inputs = key_inputs(spec, self.compiler_version or default, per_node, self.cache_key_extra, compile_backend)
        if spec.runs_user_code:
            inputs |= self.user_key_inputs(spec)
        return cache_key(inputs), inputs

    def user_key_inputs(self, spec: JobSpec) -> dict[str, Any]:
        """A user's program is known by its command and code bundle (an entry point alone does not say which
        script runs); its named step argument is a step count, left out like the trainer's ``--max-steps``."""
        extra: dict[str, Any] = {}
        if spec.command:
            extra["command"] = list(spec.command)
        if spec.code_uri:
            extra["code_uri"] = spec.code_uri
        if self.trial_steps_arg:
            from airflow_provider_trainium.neuron.compile_key import NON_GRAPH_ARGS, graph_args

            ignore = (*NON_GRAPH_ARGS, self.trial_steps_arg.rstrip("="))
            extra["args"] = graph_args(spec.args, ignore)
        return extra

    def _cache(self, spec: JobSpec) -> str:
        return spec.env[boundary.ENV_COMPILE_CACHE_URI]

    def execute(self, context: Context) -> Any:
        prepared = self.prepare(context)  # its checks refused a cache with a changed entry
        if self.skip_if_cached:
            cache = self._cache(prepared.spec)
            key, _ = self.key_for(prepared.spec, self.backend_for(prepared.compute))
            record = read_key_record(cache, key, self.artifact_conn())
            if record is not None and self.cache_still_holds(cache, key):
                self.log.info(
                    "compile cache %s already holds key %s (compiled by %s/%s on %s): skipping the trial",
                    cache,
                    key,
                    record.get("dag_id"),
                    record.get("run_id"),
                    record.get("created"),
                )
                context["ti"].xcom_push(key="metrics", value=record.get("metrics", {}))
                self._compiled = {"uri": cache, "key": key, "skipped": True}
                return {"compile_cache_uri": cache, "cache_key": key, "skipped": True, **record.get("metrics", {})}
        return super().execute(context)

    def unrecorded_cache(self, cache: str) -> None:
        self.log.info("compile cache %s has no manifest yet: this trial records one", cache)

    def cache_still_holds(self, cache: str, key: str) -> bool:
        """Whether the manifest this try's check read names ``key`` and nothing it recorded is missing; else the
        trial runs (and records the cache again)."""
        from airflow_provider_trainium import compile_manifest

        manifest = self._cache_manifest
        if manifest is None or key not in (manifest.get("keys") or {}):
            self.log.info("compile cache %s: no manifest names key %s, so its key record is not trusted: compiling",
                          cache, key)  # fmt: skip
            return False
        missing = self._cache_changes.removed if self._cache_changes else ()
        if missing:
            self.log.info("compile cache %s: %d recorded entr(ies) missing (%s): compiling again", cache, len(missing),
                          ", ".join(missing[: compile_manifest.NAMED]))  # fmt: skip
        return not missing

    def trial_metrics(self, context: Context, spec: JobSpec) -> dict[str, Any]:
        """The trial's metrics: the trainer's ``metrics.json``; a user's program usually writes none, which is
        no failure (its trial is only there to fill the cache)."""
        if not spec.runs_user_code:
            return self.load_metrics(context, str(spec.output_uri))
        if self.read_metrics(str(spec.output_uri)) is None:
            self.log.info("a user's program wrote no %s: recording the key without metrics", self.metrics_file)
            context["ti"].xcom_push(key="metrics", value={})
            return {}
        return self.load_metrics(context, str(spec.output_uri))

    def on_success(self, context: Context, spec: JobSpec, handle: JobHandle) -> Any:
        from airflow_provider_trainium.neuron.compile_key import key_record_uri

        metrics = self.trial_metrics(context, spec)
        cache = self._cache(spec)
        key, inputs = self.key_for(spec, self.backend_for(self.prepare(context).compute))
        ti = context["ti"]
        record = {
            "key": key,
            "inputs": inputs,
            "metrics": metrics,
            "dag_id": ti.dag_id,
            "run_id": ti.run_id,
            "task_id": ti.task_id,
            "created": datetime.now(UTC).isoformat(),
        }
        from airflow_provider_trainium import compile_manifest

        conn = self.artifact_conn()
        compile_manifest.record(
            self.config().artifact_root, cache, self.recorded_by(context), key=key, aws_conn_id=conn
        )
        self._cache_recorded = True
        write_key_record(cache, key, record, conn)
        self.log.info("recorded compile cache key %s at %s", key, key_record_uri(cache, key))
        self._compiled = {"uri": cache, "key": key, "skipped": False}
        return {"compile_cache_uri": cache, "cache_key": key, "skipped": False, **metrics}

    def pre_execute(self, context: Any) -> None:
        self._compiled = None
        super().pre_execute(context)

    # -- lineage: the cache is what the trial makes ---------------------------------------------------
    def lineage_locations(self, spec: JobSpec) -> tuple[list[str], list[str]]:
        """The trial reads the training run's data and models and writes the compile cache (and its metrics); a
        skipped trial wrote nothing, its cache is only read."""
        inputs, _ = super().lineage_locations(spec)
        cache = self._cache(spec)
        if self._compiled is not None and self._compiled["skipped"]:
            return inputs, []
        return [uri for uri in inputs if uri != cache], [cache, str(spec.output_uri)]

    def lineage_compile_cache(self, spec: JobSpec) -> dict[str, Any] | None:
        """The cache with the key this try recorded or found, and whether the trial was skipped."""
        return self._compiled or super().lineage_compile_cache(spec)


def default_compile_cache_uri(config: TrainiumConfig, dag_id: str) -> str:
    return f"{config.artifact_root.rstrip('/')}/compile-cache/{dag_id}"
