"""Where the view reads a job's stream: derived from the task instance's identity, not taken from an XCom.

Airflow users who may edit XComs could otherwise point the API server at any URL (the view used to open the
task's ``return_value`` on any fsspec scheme). So the output location is the one the operator itself
computes, ``<artifact_root>/runs/<dag_id>/<run key>/<task_id>[/<map_index>]``
(``TrainiumJobOperator.task_instance_prefix``), or the task's own rendered ``output_uri`` when its DAG sets one;
it is known before the job ends, so a running job shows its curves. An XCom naming another place is
ignored with a note. The location must then pass ``artifacts.confined`` (``file://`` or ``s3://`` inside the
artifact root) and, under ``<root>/runs/``, lie in this DAG's own folder (another DAG's runs are its readers').
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_provider_trainium import artifacts
from airflow_provider_trainium.compute import naming

RUNS_DIR = "runs"


@dataclass(frozen=True)
class Location:
    """The run's output URI the view may read (None: none it may), and why it reads that one."""

    uri: str | None
    notes: list[str] = field(default_factory=list)


def run_output_prefix(root: str, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """What ``TrainiumJobOperator`` names the task instance's output when its DAG names none."""
    parts = [root.rstrip("/"), RUNS_DIR, dag_id, naming.run_key(run_id), task_id]
    if map_index is not None and map_index >= 0:
        parts.append(str(map_index))
    return "/".join(parts)


def output_location(run: dict[str, Any], root: str | None) -> Location:
    """The output URI of ``run`` (a row of ``runs``) the view reads, checked against the artifact root."""
    if root is None:
        return Location(None, ["the trainium connection cannot be read: no artifact is readable"])
    rendered = run.get("rendered_output_uri")
    derived = run_output_prefix(root, run["dag_id"], run["run_id"], run["task_id"], run["map_index"])
    uri = rendered if isinstance(rendered, str) and rendered else derived
    notes = []
    pushed = run.get("output_uri")
    if isinstance(pushed, str) and pushed.rstrip("/") != uri.rstrip("/"):
        notes.append(f"the task's XCom names {pushed}; the view reads {uri}, where the task writes")
    try:
        checked = artifacts.confined(uri, root)
    except artifacts.ArtifactURIError as err:
        return Location(None, [*notes, f"not read: {err}"])
    runs_folder = artifacts.normalize(root) + f"/{RUNS_DIR}/"
    if checked.startswith(runs_folder) and not checked.startswith(f"{runs_folder}{run['dag_id']}/"):
        return Location(None, [*notes, f"not read: {checked} is another DAG's run folder"])
    return Location(checked, notes)
