"""An evaluation hold-out set's manifest: what its data job wrote, sealed, so a file swapped afterwards is seen.

The hold-out set lives under a prefix every job may write (the shared job role on AWS, the worker's user on local
compute), and every run that judges against the same set shares it. So:

- the data job that prepares it writes ``holdout-manifest.json``: the size and sha256 of every file it wrote,
  computed from the bytes it wrote (never read back), and the same record for every run that prepares the same set
  (a retry, a backfill, a second run of the day), plus a copy sealed with its own evidence key under
  ``holdout-seals/<key id>.json`` (``boundary.key_id``: one file per job, so runs sharing the set never overwrite
  each other's seal);
- the evaluation reads every file of the set once, checks it against the manifest (a file that differs is refused
  by name) and judges on those very bytes; its verdict names the manifest's fingerprint
  (``boundary.record_fingerprint``);
- the provider compares that fingerprint with the one of the copy this run's data job sealed
  (``airflow_provider_trainium.registry.holdout``). A job that replaces files and manifest alike gets a verdict on
  its files, whose fingerprint no data job of this run sealed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from trainium_trainer import boundary
from trainium_trainer.common import uri as uris
from trainium_trainer.common.errors import BadInputError


def manifest(files: Mapping[str, bytes]) -> dict[str, Any]:
    """The manifest of ``files`` (relative name -> bytes): the same files give the same record."""
    listed = {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for name, data in files.items()}
    return {"format": boundary.HOLDOUT_MANIFEST_FORMAT, "files": dict(sorted(listed.items()))}


def seal_uri(data_uri: str, key_hex: str) -> str:
    """Where the job whose evidence key is ``key_hex`` keeps its sealed copy of the manifest of ``data_uri``."""
    return uris.join(data_uri, boundary.HOLDOUT_SEALS_DIR, f"{boundary.key_id(key_hex)}.json")


def write_manifest(output_uri: str, files: Mapping[str, bytes]) -> dict[str, Any]:
    """Write the manifest of ``files`` (what this job wrote under ``output_uri``) and, when the job has an evidence
    key, its sealed copy; returns the manifest."""
    record = manifest(files)
    uris.write_json(uris.join(output_uri, boundary.HOLDOUT_MANIFEST_FILE), record)
    key = os.environ.get(boundary.ENV_EVIDENCE_KEY)
    if key:
        uris.write_json(seal_uri(output_uri, key), {**record, boundary.SEAL_FIELD: boundary.seal(record, key)})
    return record


def read_holdout(data_uri: str) -> tuple[dict[str, bytes], str]:
    """Every file the manifest of ``data_uri`` lists, each read once and checked against it, and the manifest's
    fingerprint; BadInputError naming the first file that is missing or differs (swapped after its data job)."""
    where = uris.join(data_uri, boundary.HOLDOUT_MANIFEST_FILE)
    if not uris.exists(where):
        raise BadInputError(f"no hold-out manifest at {where}: the set's data job did not record its files")
    record = uris.read_json(where)
    listed = record.get("files") if isinstance(record, dict) else None
    if (
        not isinstance(record, dict)
        or record.get("format") != boundary.HOLDOUT_MANIFEST_FORMAT
        or not isinstance(listed, dict)
    ):
        raise BadInputError(f"{where} is not a {boundary.HOLDOUT_MANIFEST_FORMAT} record")
    files = {}
    for name, entry in listed.items():
        if not isinstance(name, str) or name.startswith("/") or ".." in name.split("/"):
            raise BadInputError(f"{where} lists {name!r}: not a file under the set")
        uri = uris.join(data_uri, name)
        if not isinstance(entry, dict) or not uris.exists(uri):
            raise BadInputError(f"hold-out file {name} is missing from {data_uri} (listed in its manifest)")
        data = uris.read_bytes(uri)
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry.get("sha256") or len(data) != entry.get("size"):
            raise BadInputError(f"hold-out file {name} does not match its manifest (sha256 {digest[:12]}..., "
                                f"recorded {str(entry.get('sha256'))[:12]}...): changed after its data job wrote "
                                "it; refusing to judge on it")  # fmt: skip
        files[name] = data
    return files, boundary.record_fingerprint(record)
