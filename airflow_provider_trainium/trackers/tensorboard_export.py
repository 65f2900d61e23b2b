"""A run's export as one TensorBoard event file, under a folder of its own task instance.

The file is written with tensorboardX into a local temporary folder, then copied through ``artifacts`` (so
``s3://`` goes through the trainium connection's AWS connection). Its name is fixed per task instance: a
retry or a rerun replaces it, and TensorBoard never shows a second copy of the curves.
``tensorboardX`` is imported inside :func:`export_tensorboard` only (extra ``airflow-provider-trainium[tensorboard]``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from airflow_provider_trainium import artifacts
from airflow_provider_trainium.compute import naming
from airflow_provider_trainium.trackers.gather import RunExport

#: TensorBoard reads every file whose name holds ``tfevents``.
EVENT_FILE_PREFIX = "events.out.tfevents"


def run_folder(logdir: str, export: RunExport) -> str:
    """``<logdir>/<dag_id>/<run>/<task_id>[/<map_index>]``: one task instance's folder, one run in the UI."""
    ti = export.ti
    parts = [artifacts.normalize(logdir), ti.dag_id, naming.run_key(ti.run_id), ti.task_id]
    if ti.map_index >= 0:
        parts.append(str(ti.map_index))
    return "/".join(parts)


def event_file_name(export: RunExport) -> str:
    return f"{EVENT_FILE_PREFIX}.trainium.{export.ti.key}"


def write_events(export: RunExport, folder: Path) -> Path:
    """The event file of ``export``, written under the local ``folder``."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(logdir=str(folder), flush_secs=3600)
    try:
        for name, points in export.curves.items():
            for point in points:
                writer.add_scalar(name, point.value, point.step, walltime=point.timestamp_ms / 1000)
        for name, value in export.scalars.items():
            writer.add_scalar(name, value, export.last_step)
        writer.add_text("params", "\n".join(f"- {k}: `{v}`" for k, v in export.params.items()), 0)
    finally:
        writer.close()
    (written,) = [p for p in folder.iterdir() if EVENT_FILE_PREFIX in p.name]
    return written


def export_tensorboard(export: RunExport, logdir: str, aws_conn_id: str | None) -> str:
    """The URI of the event file written (replacing this task instance's earlier one)."""
    target = f"{run_folder(logdir, export)}/{event_file_name(export)}"
    with tempfile.TemporaryDirectory(prefix="trainium-tb-") as tmp:
        data = write_events(export, Path(tmp)).read_bytes()
    path = artifacts.open_path(target, aws_conn_id=aws_conn_id)
    if path.protocol in ("", "file", "local"):
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return target
