"""The checks of a prepared job before anything is found or submitted: where it writes, the run's budget, the
image's trust, the image's stack and Neuron driver, then the backend's own checks.

A check fails the task without retries by raising ``ValueError`` (``TrainiumJobOperator.prepare`` turns it into
``AirflowFailException``). Each is a plain function of the operator whose settings it reads and the try's
``PreSubmitCheck`` arguments; the rules themselves live in the domain modules each names (``neuron.budget``,
``neuron.images``, ``neuron.releases``, ``neuron.inputs``), imported only when a check runs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_trainium.compute.base import ComputeBackend
    from airflow_provider_trainium.operators.job import TrainiumJobOperator
    from airflow_provider_trainium.operators.job_spec import PreparedJob

#: A check of the prepared job before anything is found or submitted; raises ValueError (or
#: AirflowFailException) to fail the task without retries.
PreSubmitCheck = Callable[["Context", "PreparedJob", "ComputeBackend"], None]


def check_write_uris(
    operator: TrainiumJobOperator, context: Context, prepared: PreparedJob, backend: ComputeBackend
) -> None:
    """What the job writes (``neuron.inputs.WRITE_FIELDS``: its outputs, checkpoints and code bundle) lies under
    the artifact root or the connection's ``allowed_output_prefixes``: ``output_uri`` and ``checkpoint_uri`` are
    templated, so a run's params must not point a job's writes at another bucket, a shared data set the job may
    only read, or a path of the worker's (where the artifact root's own prefixes go is the bucket policy's and
    the registry seals' business, docs/security.md). Checked on the spec the try runs, before anything is found
    or submitted."""
    from airflow_provider_trainium.neuron.inputs import WRITE_FIELDS, allowed_prefixes, check_write

    config = operator.config()
    prefixes = allowed_prefixes(config.artifact_root, config.allowed_output_prefixes)
    for name in WRITE_FIELDS:
        uri = getattr(prepared.spec, name)
        if uri:
            check_write(name, uri, prefixes)


def check_budget(
    operator: TrainiumJobOperator, context: Context, prepared: PreparedJob, backend: ComputeBackend
) -> None:
    """The worst case (every node billed until the job's own timeout stops it) must fit ``max_cost_usd``.

    The DAG author's ceiling caps the run's budget: the operator keeps the capped one, which the watch then reads.
    """
    from airflow_provider_trainium.neuron.budget import capped_budget, check_job_budget, dag_budget_ceiling
    from airflow_provider_trainium.neuron.pricing import prices_for

    prices = prices_for(operator.config())
    operator.max_cost_usd = capped_budget(operator.max_cost_usd, dag_budget_ceiling(context.get("dag")))
    check = check_job_budget(prepared.spec, operator.max_cost_usd, operator.allow_over_budget_estimate, prices)
    summary = check.summary()
    if summary:
        operator.log.info("%s", summary)


def check_trusted_image(
    operator: TrainiumJobOperator, context: Context, prepared: PreparedJob, backend: ComputeBackend
) -> None:
    """An image-running backend only gets an image from the trusted repository or built by this DAG."""
    if backend.runs_image:
        from airflow_provider_trainium.neuron.images import check_trusted
        from airflow_provider_trainium.operators.run_images import built_references

        built = built_references(context, operator.dag if operator.has_dag() else None)
        check_trusted(prepared.spec.image, operator.config(), built)


def check_neuron_driver(
    operator: TrainiumJobOperator, context: Context, prepared: PreparedJob, backend: ComputeBackend
) -> None:
    """The hosts' Neuron driver must accept the image's Neuron runtime, or ``nrt_init()`` fails on the paid
    instances at the job's first device use. The driver is that of the job's instance type (the XLA and native
    images need different ones); a connection that does not know it gets a warning."""
    if backend.runs_image:
        from airflow_provider_trainium.neuron.releases import driver_check, image_stack_problem

        labels = operator.image_labels(context, prepared.spec.image)
        problem = image_stack_problem(prepared.spec.stack, prepared.spec.image, labels)
        if problem:
            raise ValueError(problem)
        driver = operator.config().neuron_driver_for(prepared.spec.instance_type)
        warning = driver_check(prepared.spec.image, driver, labels)
        if warning:
            operator.log.warning("%s", warning)


def check_on_backend(
    operator: TrainiumJobOperator, context: Context, prepared: PreparedJob, backend: ComputeBackend
) -> None:
    """The backend's own checks (storage, queue, layout), before any API call."""
    backend.check(prepared.spec)


#: Every job's checks, in the order a try runs them (a subclass's own come after these).
CHECKS = (check_write_uris, check_budget, check_trusted_image, check_neuron_driver, check_on_backend)


def job_checks(operator: TrainiumJobOperator) -> list[PreSubmitCheck]:
    """``CHECKS`` for ``operator``'s try, as ``PreSubmitCheck`` callables."""
    return [partial(check, operator) for check in CHECKS]
