"""What one try of a job task runs: the connection's settings, the backend, the validated ``JobSpec``, its name.

``JobSpecMixin`` turns the operator's (rendered) settings into the spec; its methods are the hooks a subclass
overrides to change what runs (``job_arguments``, ``wrapper``, ``cache_uri``, ``code_uri``, ``build_spec``), so the
operator itself (``operators.job``) only sequences the try. ``PreparedJob`` (``operators.prepared_job``, exported
here on first use) is what the try decided, carried through a deferral so it is never rebuilt.

Nothing here imports ``compute/``, the image build, the Neuron release table, the job spec (``neuron.spec``) or
the connection's settings (``hooks.trainium_config``) at module level: a DAG file that declares a job task loads
this module while it is parsed, and each of those is imported by the method that needs it when a task runs.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.operators.defaults import wait_options
from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_trainium.compute.base import ComputeBackend
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig
    from airflow_provider_trainium.neuron.spec import JobSpec
    from airflow_provider_trainium.operators.prepared_job import PreparedJob

DEFAULT_TIMEOUT = timedelta(hours=24)


def _int(value: Any, field: str) -> int:
    from airflow_provider_trainium.neuron.spec import JobSpecError

    try:
        return int(value)
    except (TypeError, ValueError):
        raise JobSpecError([f"{field} must be an integer, got {value!r}"]) from None


class JobSpecMixin:
    """The part of ``TrainiumJobOperator`` that decides what a try runs and where, from the task's settings."""

    if TYPE_CHECKING:  # the settings TrainiumJobOperator.__init__ sets, and what BaseOperator gives it
        entry_point: str
        command: list[str]
        code_dir: str | None
        secrets: dict[str, str]
        all_nodes_outputs: bool
        metric_patterns: dict[str, str] | str | None
        profile_steps: tuple[int, int] | list[int] | None
        job_args: list[str]
        env: dict[str, str]
        instance_type: str
        nodes: int | str
        processes_per_node: int | str | None
        tensor_parallel_size: int
        distributed: bool
        workload: str
        stack: str
        image: str | None
        output_uri: str | None
        checkpoint_uri: str | None
        compile_cache_uri: str | None
        capacity_reservation: str | None
        trainium_conn_id: str
        poll_interval: float | None
        log_interval: float | None
        placement_timeout: float | None
        local_max_processes_per_node: int
        execution_timeout: timedelta | None
        max_cost_usd: float | str | None
        log: Any  # BaseOperator's logger (its type differs across the Airflow versions we support)
        dag: Any
        _config: TrainiumConfig | None
        _node_count: int | None
        _backend: ComputeBackend | None
        _prepared: PreparedJob | None

        def has_dag(self) -> bool: ...

    # -- the connection and the backend -------------------------------------------------------------
    def config(self) -> TrainiumConfig:
        if self._config is None:
            from airflow_provider_trainium.hooks.trainium import TrainiumHook

            self._config = TrainiumHook(self.trainium_conn_id).get_config()
        return self._config

    def backend_for(self, compute: str) -> ComputeBackend:
        """The backend this try runs on (built once; the operator's settings go in as options)."""
        if self._backend is None or self._backend.name != compute:
            from airflow_provider_trainium.compute.backends import build_backend

            self._backend = build_backend(compute, self.config(), self.backend_options())
        return self._backend

    def backend_options(self) -> dict[str, Any]:
        """The operator's settings a backend may take (each backend reads the ones it knows)."""
        wait = wait_options(self.poll_interval, self.log_interval, self.placement_timeout)
        return {"local_max_processes_per_node": self.local_max_processes_per_node, **wait}

    # -- what to run --------------------------------------------------------------------------------
    def job_timeout(self) -> timedelta:
        """The job's own timeout: ``execution_timeout``, else the one this try's spec was built with (a budget's
        default, :meth:`spec_timeout`), else ``DEFAULT_TIMEOUT``. The wait's deadline and the deferral's timeout
        read it, so they stop the job when the budget check assumed it stops."""
        if self.execution_timeout:
            return self.execution_timeout
        if self._prepared is not None:
            return timedelta(seconds=self._prepared.spec.timeout_seconds)
        return DEFAULT_TIMEOUT

    def spec_timeout(self, context: Context, config: TrainiumConfig) -> timedelta:
        """The timeout the job is built with: ``execution_timeout`` when set; with a budget (the run's, under the
        DAG's ceiling) and none, the longest the budget affords, at most ``DEFAULT_TIMEOUT``.

        Without that default the 24 h default alone sets the worst case, so a budget under a day's price is
        refused although the job may need an hour; the task log says which timeout the budget chose.
        """
        if self.execution_timeout:
            return self.execution_timeout
        from airflow_provider_trainium.neuron.budget import budget_timeout, capped_budget, dag_budget_ceiling
        from airflow_provider_trainium.neuron.pricing import prices_for

        budget = capped_budget(self.max_cost_usd, dag_budget_ceiling(context.get("dag")))
        if budget is None:
            return DEFAULT_TIMEOUT
        nodes, instance_type = self._nodes(), str(self.instance_type)
        timeout = budget_timeout(nodes, instance_type, budget, DEFAULT_TIMEOUT, prices_for(config))
        self.log.info(
            "no execution_timeout: the job's timeout is %.4gh, the longest max_cost_usd $%.2f affords for %d x %s "
            "(at most %.4gh)",
            timeout.total_seconds() / 3600, budget, nodes, instance_type, DEFAULT_TIMEOUT.total_seconds() / 3600,
        )  # fmt: skip
        return timeout

    @staticmethod
    def task_instance_prefix(context: Context, config: TrainiumConfig, kind: str) -> str:
        """``<artifact_root>/<kind>/<dag_id>/<run>/<task_id>[/<map_index>]``: one task instance's place."""
        from airflow_provider_trainium.compute import naming

        ti = context["ti"]
        parts = [config.artifact_root.rstrip("/"), kind, ti.dag_id, naming.run_key(ti.run_id), ti.task_id]
        if ti.map_index is not None and ti.map_index >= 0:
            parts.append(str(ti.map_index))
        return "/".join(parts)

    def run_prefix(self, context: Context, config: TrainiumConfig) -> str:
        return self.task_instance_prefix(context, config, "runs")

    def job_arguments(self) -> list[str]:
        """The entry point's arguments (a compile trial adds its own)."""
        return [str(a) for a in self.job_args]

    def cache_uri(self, context: Context, config: TrainiumConfig) -> str | None:
        """The persistent compilation cache the job uses, if any."""
        return self.compile_cache_uri or None

    def extra_env(self, context: Context, config: TrainiumConfig, backend: ComputeBackend) -> dict[str, str]:
        from airflow_provider_trainium.neuron.inputs import allowed_prefixes, prefixes_env

        # the trainer checks its inputs again against these prefixes
        env: dict[str, str] = prefixes_env(allowed_prefixes(config.artifact_root, config.allowed_input_prefixes))
        cache = self.cache_uri(context, config)
        if cache:
            env[boundary.ENV_COMPILE_CACHE_URI] = cache
        env.update(backend.job_environment(cache))
        return env

    def wrapper(self, backend: ComputeBackend) -> tuple[str, ...]:
        return ()

    def metric_patterns_env(self) -> dict[str, str]:
        """``metric_patterns`` as the launcher's variable (``trainium_trainer.metric_lines``), checked first: a
        pattern that could never make a record fails the task before anything starts."""
        patterns = self.metric_patterns
        if not patterns:
            return {}
        from airflow_provider_trainium.neuron.spec import JobSpecError, runs_user_code

        if isinstance(patterns, str):
            if patterns not in boundary.METRIC_PATTERN_SETS:
                sets = ", ".join(boundary.METRIC_PATTERN_SETS)
                raise JobSpecError([f"metric_patterns {patterns!r}: not a built-in set ({sets}), nor a mapping"])
            patterns = dict(boundary.METRIC_PATTERN_SETS[patterns])
        problems = boundary.metric_pattern_problems(patterns)
        if not runs_user_code(self.command, self.entry_point):
            problems.append("metric_patterns applies to a user's job (a project trainer writes its own curves)")
        if problems:
            raise JobSpecError(problems)
        return {boundary.ENV_METRIC_PATTERNS: json.dumps(patterns, sort_keys=True)}

    def profile_env(self) -> dict[str, str]:
        """``profile_steps`` as the trainer's variable, checked before anything starts."""
        from airflow_provider_trainium.neuron.spec import JobSpecError

        if self.profile_steps is None:
            return {}
        steps = list(self.profile_steps) if isinstance(self.profile_steps, tuple | list) else []
        try:
            if len(steps) != 2 or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
                raise ValueError(f"profile_steps {self.profile_steps!r}: expected (first, last), two step numbers")
            value = f"{steps[0]}:{steps[1]}"
            boundary.parse_profile_steps(value)
        except ValueError as err:
            raise JobSpecError([str(err)]) from err
        return {boundary.ENV_PROFILE_STEPS: value}

    def user_env_problems(self) -> list[str]:
        """The task's own ``env`` by the rule for a task's names (no ``AWS_*``: credentials come by role or secret)."""
        from airflow_provider_trainium.neuron.spec import env_name_problem

        return [p for p in (env_name_problem(str(name), user=True) for name in self.env) if p]

    def code_uri(self, context: Context, config: TrainiumConfig) -> str | None:
        """The job's code bundle: ``code_dir`` uploaded by content hash (nothing to ship: None)."""
        if not self.code_dir:
            return None
        from airflow_provider_trainium.code_bundle import upload_bundle

        return upload_bundle(self.code_dir, config.artifact_root, config.aws_conn_id)

    def default_checkpoint_uri(self, context: Context, config: TrainiumConfig) -> str:
        """A user's job keeps checkpoints per task instance, so every retry and rerun of it resumes them."""
        return self.task_instance_prefix(context, config, "checkpoints")

    def image_labels(self, context: Context, image: str | None) -> dict[str, str] | None:
        """The labels of ``image`` when a build task of this run built it (they name its Neuron release and so its
        stack), else None."""
        if not image:
            return None
        from airflow_provider_trainium.operators.run_images import built_image_labels

        return built_image_labels(context, self.dag if self.has_dag() else None, image)

    def build_spec(self, context: Context, config: TrainiumConfig, backend: ComputeBackend) -> JobSpec:
        from airflow_provider_trainium.compute import naming
        from airflow_provider_trainium.neuron.releases import resolve_stack
        from airflow_provider_trainium.neuron.spec import JobSpec, JobSpecError

        problems = self.user_env_problems()
        if problems:
            raise JobSpecError(problems)

        # the release table's rule, before all else; an image-running backend's image carries its own stack
        image = (self.image or config.image) if backend.runs_image else None
        stack = resolve_stack(str(self.stack), str(self.instance_type), image, self.image_labels(context, image))
        prefix = self.run_prefix(context, config)
        ti = context["ti"]
        spec = JobSpec(
            name=naming.safe_part(f"{ti.dag_id}-{ti.task_id}", 100),
            entry_point=self.entry_point,
            args=tuple(self.job_arguments()),
            env={
                **self.extra_env(context, config, backend),
                **self.metric_patterns_env(),
                **self.profile_env(),
                **{k: str(v) for k, v in self.env.items()},
            },
            instance_type=str(self.instance_type),
            nodes=self._nodes(),
            processes_per_node=None
            if self.processes_per_node in (None, "", "None")
            else _int(self.processes_per_node, "processes_per_node"),
            tensor_parallel_size=_int(self.tensor_parallel_size, "tensor_parallel_size"),
            distributed=self.distributed,
            workload=self.workload,  # type: ignore[arg-type]  # a str here; JobSpec checks it is one of its literals
            image=self.image or config.image,
            timeout_seconds=int(self.spec_timeout(context, config).total_seconds()),
            checkpoint_uri=self.checkpoint_uri,
            output_uri=self.output_uri or prefix,
            wrapper=self.wrapper(backend),
            stack=stack,
            command=tuple(self.command),
            secrets=dict(self.secrets),
            all_nodes_outputs=bool(self.all_nodes_outputs),
            capacity_reservation=str(self.capacity_reservation or "").strip() or None,
        )
        if spec.runs_user_code:
            spec = spec.with_changes(
                checkpoint_uri=spec.checkpoint_uri or self.default_checkpoint_uri(context, config),
                code_uri=self.code_uri(context, config),
            )
        from airflow_provider_trainium.compute.cost import with_cost_environment
        from airflow_provider_trainium.neuron.pricing import prices_for

        return with_cost_environment(spec, backend.name, prices_for(config)).validate()

    def _nodes(self) -> int:
        """``nodes`` (templated: it may arrive as a string) as an int, converted once per try."""
        if self._node_count is None:
            self._node_count = _int(self.nodes, "nodes")
        return self._node_count


def __getattr__(name: str) -> Any:
    """``PreparedJob``, from ``operators.prepared_job`` on first use (see its docstring)."""
    if name == "PreparedJob":
        from airflow_provider_trainium.operators.prepared_job import PreparedJob

        return PreparedJob
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
