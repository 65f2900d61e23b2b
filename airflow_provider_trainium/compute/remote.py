"""What a job on remote compute (ECS, Batch) may ask for: an instance type EC2 launches, and S3 only.

A container on AWS cannot see the Airflow host's disk. A ``file://`` or plain-path artifact root, output,
checkpoint or compile cache would be accepted by the APIs and fail only after the instances are paid
for, so the backends refuse it before their first call; the same for an announced instance type the EC2 API
does not list yet (Trn3), which the catalog knows but no stack can launch.
"""

from __future__ import annotations

from functools import cache

from airflow_provider_trainium.neuron.catalog import CATALOG
from airflow_provider_trainium.neuron.spec import JobSpec
from trainium_trainer import boundary

#: Environment variables of a job that name storage the container reads or writes.
STORAGE_ENV: tuple[str, ...] = (boundary.ENV_COMPILE_CACHE_URI, "NEURON_COMPILE_CACHE_URL")


@cache
def ec2_instance_types() -> frozenset[str]:
    """Every instance type the EC2 API model of the installed botocore lists: what RunInstances can be asked for.
    Read once (the model is large), on a run's first check, never when a DAG file is parsed."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("ec2")
    return frozenset(model.shape_for("InstanceType").enum)


def launch_problem(instance_type: str) -> str | None:
    """Why ECS or Batch cannot get ``instance_type`` from EC2 yet (an announced type the EC2 API does not list),
    so a run is refused before anything is paid for; None when EC2 lists it. The refusal lifts itself with the
    botocore release whose EC2 model names the type."""
    if instance_type in ec2_instance_types():
        return None
    import botocore

    launchable = ", ".join(sorted(name for name in CATALOG if name in ec2_instance_types()))
    return (
        f"{instance_type} is announced but EC2 cannot launch it yet: the EC2 API of botocore {botocore.__version__} "
        f"lists no such instance type, so no ECS or Batch job could start on it; use one of {launchable}, or "
        f"compute=local"
    )


def non_s3_locations(spec: JobSpec, artifact_root: str) -> list[str]:
    """Every storage location of ``spec`` (and the connection's artifact root) that is not ``s3://``."""
    named = {
        "artifact_root (trainium connection)": artifact_root,
        "output_uri": spec.output_uri,
        "checkpoint_uri": spec.checkpoint_uri,
        **{f"env {name}": spec.env.get(name) for name in STORAGE_ENV},
    }
    return [f"{what} {uri!r}" for what, uri in named.items() if uri is not None and not uri.startswith("s3://")]


def remote_launch_problem(spec: JobSpec, artifact_root: str, backend: str) -> str | None:
    """A message naming an instance type EC2 cannot launch yet, else every non-S3 location; None when the job
    can start on AWS and only touches S3."""
    unlaunchable = launch_problem(spec.instance_type)
    if unlaunchable:
        return unlaunchable
    bad = non_s3_locations(spec, artifact_root)
    if not bad:
        return None
    return (
        f"compute={backend!r} runs the job on AWS, which cannot reach this machine's files, but "
        + ", ".join(bad)
        + " is not an s3:// URI; set artifact_root in the trainium connection to s3://bucket/prefix "
        "(the base stack's ArtifactRoot output) or run with compute='local'"
    )
