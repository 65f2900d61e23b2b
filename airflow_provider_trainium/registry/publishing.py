"""Publishing a model's files as the next version: once per content, safe against concurrent and crashed writers.

A registration hashes the source, takes a version number (its ``claim.json``) and then the content's index
entry, both by exclusive create: a writer that loses the content to another gives its number back and follows
theirs, so identical content is one version. It uploads the files (each copy verified against its hash) and
writes the manifest last: the manifest is the commit point, so a crash leaves no half version to readers, and
the next registration of the same content finishes it.
"""

from __future__ import annotations

import json
import logging
from typing import Any, cast

from airflow.sdk import ObjectStoragePath

from airflow_provider_trainium.registry import store
from airflow_provider_trainium.registry.errors import RegistryError
from airflow_provider_trainium.registry.hashing import (
    RUN_BOOKKEEPING,
    FileEntry,
    dataset_hash,
    fingerprint,
    hash_tree,
    walk_files,
)
from airflow_provider_trainium.registry.manifest import (
    FORMAT,
    cost_info,
    image_info,
    now_iso,
    software_versions,
    summary_metrics,
)
from airflow_provider_trainium.registry.names import parse_ref, validate_model_name
from airflow_provider_trainium.registry.reading import RegistryReader
from airflow_provider_trainium.registry.records import RegisterResult
from airflow_provider_trainium.registry.store import MAX_ATTEMPTS, jsonable
from airflow_provider_trainium.registry.transfer import copy_verified, same_content

log = logging.getLogger(__name__)

DEFAULT_DATASET_HASH_MAX_BYTES = 2 * 2**30


class RegistryPublisher(RegistryReader):
    """A registry root that publishes versions (and reads them: a base model is pinned by resolving it)."""

    def register(
        self,
        name: str,
        source_uri: str,
        *,
        metrics_file: str | None = "metrics.json",
        params: dict[str, Any] | None = None,
        lineage: dict[str, Any] | None = None,
        dataset_uri: str | None = None,
        dataset_hash_max_bytes: int = DEFAULT_DATASET_HASH_MAX_BYTES,
        checkpoint_uri: str | None = None,
        base_model: str | None = None,
        image: str | None = None,
        cost: dict[str, Any] | None = None,
    ) -> RegisterResult:
        """Publish the files under ``source_uri`` as the next version of ``name``.

        Identical content (same relative paths and sha256) returns the version that already holds it,
        so a retried task, or a second run that produced the same bytes, never creates a second version.
        ``created`` is True only when this call published the version: a version that already existed (a
        retry, a cleared rerun that keeps its run id) is reported as existing.
        A registration that crashed part-way is finished by the next registration of the same content.
        ``cost`` is the ``trainium_cost`` record of the run that trained the files (kept in the manifest).
        """
        validate_model_name(name)
        source = self._open(source_uri)
        entries = hash_tree(source, skip=RUN_BOOKKEEPING)  # a version holds the model, not how the run went
        if not entries:
            raise RegistryError(f"nothing to register: {source_uri} holds no files")
        metrics = self._read_metrics(source, metrics_file)
        fp = fingerprint(entries)
        manifest_fields = {
            "source": {"uri": store.uri_of(source), **(lineage or {}), **self._job_marker(source)},
            "image": image_info(image),
            "software": software_versions(metrics, params),
            "params": jsonable(params or {}),
            "metrics": summary_metrics(metrics),
            "dataset": self._dataset(dataset_uri, dataset_hash_max_bytes),
            "checkpoint": {"uri": checkpoint_uri} if checkpoint_uri else None,
            "base_model": self._base_model(base_model),
            "cost": cost_info(cost),
        }
        model_dir = self._model_dir(name)
        for _ in range(MAX_ATTEMPTS):
            version = self._version_for_content(name, fp)
            if version is None:
                version = self._claim_version(name, fp, manifest_fields["source"])
                index = model_dir / "index" / f"{fp}.json"
                if not store.create(index, store.dump_json({"version": version})):
                    # Someone claimed this content first: give our number back and follow theirs.
                    self._release_claim(name, version, fp)
                    continue
            self._fresh(name)
            existing = store.read_json(self._version_dir(name, version) / "manifest.json")
            if existing is not None:
                log.info("model %s: content %s is already version %d", name, fp[:12], version)
                return RegisterResult(self._model_version(name, version, existing), created=False)
            return self._publish(name, version, source, entries, fp, manifest_fields)
        raise RegistryError(f"could not register {name!r}: too much contention")

    def _read_metrics(self, source: ObjectStoragePath, metrics_file: str | None) -> dict[str, Any] | None:
        if not metrics_file:
            return None
        path = source / metrics_file
        data = store.read_bytes(path)
        if data is None:
            raise RegistryError(
                f"metrics file {metrics_file!r} not found in {store.uri_of(source)} (pass metrics_file=None "
                "to register without metrics)"
            )
        try:
            metrics = json.loads(data)
        except ValueError as exc:
            raise RegistryError(f"{store.uri_of(path)} is not valid JSON: {exc}") from exc
        if not isinstance(metrics, dict):
            raise RegistryError(f"{store.uri_of(path)} must hold a JSON object")
        return metrics

    @staticmethod
    def _job_marker(source: ObjectStoragePath) -> dict[str, Any]:
        """The trainer's ``_SUCCESS`` marker names the job that produced the files."""
        try:
            marker = store.read_json(source / "_SUCCESS")
        except ValueError:
            return {}
        job_hash = marker.get("job_hash") if isinstance(marker, dict) else None
        return {"job_hash": job_hash} if job_hash else {}

    def _dataset(self, dataset_uri: str | None, max_bytes: int) -> dict[str, Any] | None:
        if not dataset_uri:
            return None
        path = self._open(dataset_uri)
        return {"uri": store.uri_of(path), **dataset_hash(path, max_bytes)}

    def _base_model(self, base_model: str | None) -> dict[str, Any] | None:
        """A registry reference (``name:3``, ``name@production``) is pinned to its version; anything
        else (a Hugging Face id, a URI) is recorded as given."""
        if not base_model:
            return None
        try:
            ref = parse_ref(base_model)
        except ValueError:
            return {"ref": base_model}
        if ref.version is None and ref.alias is None:
            return {"ref": base_model}
        parent = self.resolve(ref)  # verified: a tampered parent is refused, not recorded
        return {
            "ref": base_model,
            "name": parent.name,
            "version": parent.version,
            "uri": parent.uri,
            "fingerprint": parent.manifest.get("fingerprint"),
        }

    def _version_for_content(self, name: str, fp: str) -> int | None:
        self._fresh(name)
        index = store.read_json(self._model_dir(name) / "index" / f"{fp}.json")
        return int(index["version"]) if index else None

    def _claimed_numbers(self, name: str) -> list[int]:
        self._fresh(name)
        versions = self._model_dir(name) / "versions"
        if not versions.exists():
            return []
        return [int(p.name) for p in versions.iterdir() if p.name.isdigit()]

    def _claim_version(self, name: str, fp: str, source: dict[str, Any]) -> int:
        """Take the next free number by exclusively creating its ``claim.json``."""
        claim = store.dump_json({"fingerprint": fp, "claimed_at": now_iso(), "source": source})
        candidate = max(self._claimed_numbers(name), default=0) + 1
        for _ in range(MAX_ATTEMPTS):
            if store.create(self._version_dir(name, candidate) / "claim.json", claim):
                return candidate
            candidate += 1
        raise RegistryError(f"could not allocate a version of {name!r}: too much contention")

    def _release_claim(self, name: str, version: int, fp: str) -> None:
        path = self._version_dir(name, version) / "claim.json"
        current = store.read_json(path)
        if current and current.get("fingerprint") == fp:
            path.unlink(missing_ok=True)

    def _publish(
        self,
        name: str,
        version: int,
        source: ObjectStoragePath,
        entries: list[FileEntry],
        fp: str,
        fields: dict[str, Any],
    ) -> RegisterResult:
        vdir = self._version_dir(name, version)
        self._upload(source, vdir / "files", entries)
        manifest = {
            "format": FORMAT,
            "name": name,
            "version": version,
            "created_at": now_iso(),
            "fingerprint": fp,
            "total_bytes": sum(e.size for e in entries),
            "files": [e.to_dict() for e in entries],
            **fields,
        }
        return self._write_manifest(name, version, manifest)

    def _write_manifest(self, name: str, version: int, manifest: dict[str, Any]) -> RegisterResult:
        """The commit point: the version exists from the moment its manifest does."""
        path = self._version_dir(name, version) / "manifest.json"
        created = store.create(path, store.dump_json(manifest))
        if not created:  # a concurrent registration of the same content got there first
            manifest = cast("dict[str, Any]", store.read_json(path))  # the manifest that registration wrote
        return RegisterResult(self._model_version(name, version, manifest), created=created)

    def _upload(self, source: ObjectStoragePath, dest: ObjectStoragePath, entries: list[FileEntry]) -> None:
        sources = dict(walk_files(source))
        for entry in entries:
            target = dest / entry.path
            if same_content(target, entry):
                continue  # left by an earlier attempt at this same content, byte for byte
            copy_verified(sources[entry.path], target, entry)
