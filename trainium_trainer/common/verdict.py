"""An evaluation job's verdict record: the metric, the threshold, pass or fail, and the fingerprint of the files
it judged, written to the job's own output location.

Why a record and not the job's exit status: Airflow's task state can be edited by whoever may edit task
instances (mark success), so promotion re-reads this record instead (``registry.verdict``). The fingerprint is the
registry's (``boundary.model_fingerprint``), so a verdict holds only for the very files the registry publishes.
The record is sealed with the job's own evidence key (``boundary.ENV_EVIDENCE_KEY``), so the provider can tell it
from one another job or an edit wrote.
"""

from __future__ import annotations

import os
from typing import Any

from trainium_trainer import boundary
from trainium_trainer.common import uri as uris


def model_entries(model_uri: str) -> list[tuple[str, int, str]]:
    """``(relative path, size, sha256)`` of every file of the model under ``model_uri``, run bookkeeping excluded."""
    fs, root = uris.filesystem(model_uri)
    base = root.rstrip("/") + "/"
    entries = []
    for full in sorted(fs.find(root)):
        rel = full[len(base) :] if full.startswith(base) else full.rsplit("/", 1)[-1]
        if rel.startswith(boundary.RUN_BOOKKEEPING_PREFIXES):
            continue
        with fs.open(full, "rb") as fh:
            size, digest = boundary.sha256_read(fh)
        entries.append((rel, size, digest))
    return entries


def write_verdict(
    output_uri: str,
    *,
    model_uri: str,
    metric: str,
    value: float,
    threshold: float,
    comparison: str,
    details: dict[str, Any] | None = None,
    holdout_fingerprint: str | None = None,
) -> dict[str, Any]:
    """Hash the model's files now (after anything the evaluation wrote next to them) and write the record to
    ``<output_uri>/verdict.json``; returns it. Pass or fail is ``value <comparison> threshold`` over the recorded
    numbers (``boundary.passes``), the rule the provider applies again. ``holdout_fingerprint``: the fingerprint of
    the hold-out set's manifest the files were judged on (``common.holdout``), recorded when given."""
    entries = model_entries(model_uri)
    record = {
        "format": boundary.VERDICT_FORMAT,
        "metric": metric,
        "value": value,
        "threshold": threshold,
        "comparison": comparison,
        "passed": boundary.passes(value, comparison, threshold),
        "model_uri": model_uri,
        "model_fingerprint": boundary.model_fingerprint(entries),
        "model_files": len(entries),
        "details": details or {},
    }
    if holdout_fingerprint is not None:
        record["holdout_fingerprint"] = holdout_fingerprint
    key = os.environ.get(boundary.ENV_EVIDENCE_KEY)
    if key:
        record[boundary.SEAL_FIELD] = boundary.seal(record, key)
    uris.write_json(uris.join(output_uri, boundary.VERDICT_FILE), record)
    return record
