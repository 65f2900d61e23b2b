"""What a job on remote compute (ECS, Batch) may be pointed at: S3 only.

A container on AWS cannot see the Airflow host's disk. A ``file://`` or plain-path artifact root, output,
checkpoint or compile cache would be accepted by the APIs and fail only after the instances are paid
for, so the backends refuse it before their first call.
"""

from __future__ import annotations

from airflow_provider_trainium.neuron.spec import JobSpec
from trainium_trainer import boundary

#: Environment variables of a job that name storage the container reads or writes.
STORAGE_ENV: tuple[str, ...] = (boundary.ENV_COMPILE_CACHE_URI, "NEURON_COMPILE_CACHE_URL")


def non_s3_locations(spec: JobSpec, artifact_root: str) -> list[str]:
    """Every storage location of ``spec`` (and the connection's artifact root) that is not ``s3://``."""
    named = {
        "artifact_root (trainium connection)": artifact_root,
        "output_uri": spec.output_uri,
        "checkpoint_uri": spec.checkpoint_uri,
        **{f"env {name}": spec.env.get(name) for name in STORAGE_ENV},
    }
    return [f"{what} {uri!r}" for what, uri in named.items() if uri is not None and not uri.startswith("s3://")]


def remote_storage_problem(spec: JobSpec, artifact_root: str, backend: str) -> str | None:
    """A message naming every non-S3 location, or None when the job only touches S3."""
    bad = non_s3_locations(spec, artifact_root)
    if not bad:
        return None
    return (
        f"compute={backend!r} runs the job on AWS, which cannot reach this machine's files, but "
        + ", ".join(bad)
        + " is not an s3:// URI; set artifact_root in the trainium connection to s3://bucket/prefix "
        "(the base stack's ArtifactRoot output) or run with compute='local'"
    )
