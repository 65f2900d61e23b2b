"""``@task.trainium``: run a Python function on every process of a Trainium job.

    @task.trainium(instance_type="trn1.32xlarge", nodes=2)
    def train(epochs: int) -> dict:
        import torch.distributed as dist
        ...
        return {"loss": loss}

The function runs under torchrun on every node (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` set
as torchrun sets them), with everything ``TrainiumJobOperator`` gives a job: layout params, budget, cost,
preflight, retry-attach, log streaming, output and checkpoint folders. Its source travels as Airflow's
container decorators ship it (``@task.docker`` writes the source without its decorator next to the call's
input; so does this): the source (``remove_task_decorator``) and the call's arguments as JSON go into the
job's code bundle (``code_bundle``), which the in-container runner ``trainium_trainer.function`` loads and calls. JSON,
not pickle, both ways: nothing a job wrote is ever unpickled by Airflow, and an argument or return value JSON
cannot carry is refused with its name. Rank 0's return value is the task's XCom. The function's imports must
exist in the image; the runner says so when one does not.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import math
import shutil
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.common.compat.sdk import DecoratedOperator, TaskDecorator, task_decorator_factory

from airflow_provider_trainium.operators.job import TrainiumJobOperator
from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_trainium.compute.base import JobHandle
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig
    from airflow_provider_trainium.neuron.spec import JobSpec

#: What every process of a ``@task.trainium`` job runs: the in-image function runner.
RUNNER_COMMAND: tuple[str, ...] = ("python", "-m", "trainium_trainer.function")
#: ``TrainiumJobOperator`` arguments the decorator sets itself: the job runs the decorated function.
TAKEN_ARGUMENTS = ("entry_point", "command", "script")


class FunctionCallError(ValueError):
    """An argument that cannot cross to the job as JSON: bad input, so the task fails before anything starts
    and is not retried (``prepare`` turns every ValueError into that)."""


def json_problem(value: Any, where: str) -> str | None:
    """Why ``value`` does not survive a JSON round trip unchanged (None when it does)."""
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is {value!r}, which JSON cannot carry"
    if isinstance(value, list):
        return next((p for i, v in enumerate(value) if (p := json_problem(v, f"{where}[{i}]"))), None)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has the key {key!r}: JSON object keys are strings"
            problem = json_problem(item, f"{where}[{key!r}]")
            if problem:
                return problem
        return None
    return (
        f"{where} is a {type(value).__name__}, which cannot cross to a Trainium job: arguments and return "
        "values travel as JSON (None, bool, int, float, str, list, dict with string keys); pass a URI instead"
    )


class _TrainiumDecoratedOperator(DecoratedOperator, TrainiumJobOperator):
    """``TrainiumJobOperator`` whose command is the function runner and whose code bundle holds the function."""

    template_fields: Sequence[str] = (*DecoratedOperator.template_fields, *TrainiumJobOperator.template_fields)
    template_fields_renderers: ClassVar[dict[str, str]] = {**DecoratedOperator.template_fields_renderers}
    custom_operator_name: str = "@task.trainium"

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        for taken in TAKEN_ARGUMENTS:  # also through .override(); BaseOperator refuses the unknown ones
            if taken in kwargs:
                raise TypeError(f"@task.trainium runs the decorated function; it takes no {taken}")
        super().__init__(
            python_callable=python_callable,
            op_args=op_args,
            op_kwargs=op_kwargs,
            command=list(RUNNER_COMMAND),
            **kwargs,
        )

    def call_document(self) -> dict[str, Any]:
        """The call the runner makes: the function's name, its arguments (JSON-checked) and source."""
        args, kwargs = list(self.op_args or ()), dict(self.op_kwargs or {})
        for index, value in enumerate(args):
            problem = json_problem(value, f"argument {index} of {self.python_callable.__name__}()")
            if problem:
                raise FunctionCallError(problem)
        for name, value in kwargs.items():
            problem = json_problem(value, f"argument {name!r} of {self.python_callable.__name__}()")
            if problem:
                raise FunctionCallError(problem)
        return {"function": self.python_callable.__name__, "args": args, "kwargs": kwargs}

    def code_uri(self, context: Context, config: TrainiumConfig) -> str | None:
        """The bundle: ``code_dir`` (if any) plus the function's source and the call, uploaded by content hash."""
        from airflow_provider_trainium.code_bundle import upload_bundle

        call = self.call_document()
        folder = Path(tempfile.mkdtemp(prefix="trainium-function-"))
        try:
            if self.code_dir:
                # Links copied as links, so the bundle refuses them as it does for the job operator's code_dir:
                # following one would upload whatever it points at (a credentials file, another user's code).
                shutil.copytree(self.code_dir, folder, dirs_exist_ok=True, symlinks=True)
            target = folder / boundary.FUNCTION_BUNDLE_DIR
            target.mkdir(exist_ok=True)
            (target / boundary.FUNCTION_SOURCE_FILE).write_text(self.get_python_source())
            (target / boundary.FUNCTION_CALL_FILE).write_text(json.dumps(call, sort_keys=True, allow_nan=False))
            return upload_bundle(folder, config.artifact_root, config.aws_conn_id)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def on_success(self, context: Context, spec: JobSpec, handle: JobHandle) -> Any:
        """Rank 0's return value, read back from the job's output as JSON."""
        from airflow_provider_trainium import artifacts

        uri = f"{spec.output_uri}/{boundary.FUNCTION_RESULT_FILE}"
        document = artifacts.read_json(uri, missing_ok=True, trainium_conn_id=self.trainium_conn_id)
        if not isinstance(document, dict) or "result" not in document:
            from airflow.providers.common.compat.sdk import AirflowException

            raise AirflowException(f"job {handle.job_id} succeeded but left no function result at {uri}")
        return document["result"]

    def execute(self, context: Context) -> Any:
        # the call's arguments are rendered by now; the function itself runs in the job, not here
        return TrainiumJobOperator.execute(self, context)


@functools.cache
def accepted_arguments() -> frozenset[str]:
    """The keyword arguments ``@task.trainium(...)`` takes: those of every ``__init__`` in the operator's classes
    (``TrainiumJobOperator``, its mixins, ``BaseOperator``), less the function's own and ``TAKEN_ARGUMENTS``."""
    names = {
        name
        for cls in _TrainiumDecoratedOperator.__mro__
        if "__init__" in vars(cls)
        for name, param in inspect.signature(vars(cls)["__init__"]).parameters.items()
        if param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY)
    }
    return frozenset(names - {"self", "python_callable", "op_args", "op_kwargs", *TAKEN_ARGUMENTS})


def check_arguments(kwargs: Mapping[str, Any]) -> None:
    """Refuse an argument the operator does not take, when the DAG file is parsed: a mapped task (``.expand``)
    builds its operator only when it runs, where a TypeError would be retried instead of naming the typo."""
    for taken in TAKEN_ARGUMENTS:
        if taken in kwargs:
            raise TypeError(f"@task.trainium runs the decorated function; it takes no {taken}")
    accepted = accepted_arguments()
    if unknown := sorted(set(kwargs) - accepted):
        named = ", ".join(
            f"{name!r}"
            + "".join(f" (did you mean {close!r}?)" for close in difflib.get_close_matches(name, accepted, 1))
            for name in unknown
        )
        raise TypeError(f"@task.trainium got unexpected keyword arguments {named}: it takes TrainiumJobOperator's")


def trainium_task(python_callable: Callable[..., Any] | None = None, **kwargs: Any) -> TaskDecorator:
    """``@task.trainium(...)``: the function runs on every process of a Trainium job (``TrainiumJobOperator``'s
    arguments, but no ``entry_point``, ``command`` or ``script``); any other argument is refused here, at parse
    time."""
    check_arguments(kwargs)
    return task_decorator_factory(
        python_callable=python_callable, decorated_operator_class=_TrainiumDecoratedOperator, **kwargs
    )
