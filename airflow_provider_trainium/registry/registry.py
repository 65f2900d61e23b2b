"""The model registry: immutable, numbered versions of a model's files, with lineage and aliases.

Layout under the root (``file://...`` or ``s3://bucket/prefix``)::

    models/<name>/versions/<N>/claim.json       version number N taken (by exclusive create)
    models/<name>/versions/<N>/files/...        the model's files, uploaded first
    models/<name>/versions/<N>/manifest.json    written last: a version without it does not exist
    models/<name>/index/<fingerprint>.json      content -> version, so identical content is registered once
    models/<name>/aliases/<alias>.json          current target of an alias
    models/<name>/aliases/<alias>.history/<R>.json   every move, revision R = 1, 2, ...
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

from airflow.sdk import ObjectStoragePath

from airflow_provider_trainium.registry import store
from airflow_provider_trainium.registry.errors import (  # noqa: F401  (re-exported: registry.registry.<Error>)
    IntegrityError,
    NotFoundError,
    RegistryError,
    SourceChangedError,
)
from airflow_provider_trainium.registry.hashing import (
    RUN_BOOKKEEPING,
    FileEntry,
    dataset_hash,
    fingerprint,
    hash_tree,
    sha256_stream,
    walk_files,
)
from airflow_provider_trainium.registry.manifest import (
    FORMAT,
    cost_info,
    image_info,
    manifest_files,
    now_iso,
    software_versions,
    summary_metrics,
)
from airflow_provider_trainium.registry.names import (
    MODEL_NAME_RE,
    ModelRef,
    parse_ref,
    validate_alias,
    validate_model_name,
    validate_version,
)

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 100
DEFAULT_DATASET_HASH_MAX_BYTES = 2 * 2**30


@dataclass(frozen=True)
class ModelVersion:
    """A published version: its manifest and where its files are."""

    name: str
    version: int
    uri: str
    manifest_uri: str
    manifest: dict[str, Any]

    @property
    def metrics(self) -> dict[str, Any]:
        return self.manifest.get("metrics") or {}


@dataclass(frozen=True)
class RegisterResult:
    version: ModelVersion
    created: bool

    def to_xcom(self) -> dict[str, Any]:
        return {
            "name": self.version.name,
            "version": self.version.version,
            "uri": self.version.uri,
            "manifest_uri": self.version.manifest_uri,
            "created": self.created,
        }


@dataclass(frozen=True)
class AliasState:
    """One alias move (also the alias's current state: the latest move)."""

    name: str
    alias: str
    version: int
    revision: int
    previous_version: int | None
    moved_at: str
    moved_by: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AliasState:
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__ if k in data})

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class VerifyReport:
    name: str
    version: int
    checked: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


class ModelRegistry:
    """One registry root. Every method is safe to call concurrently from several processes."""

    def __init__(self, root_uri: str, conn_id: str | None = None) -> None:
        self.root_uri = root_uri
        self.conn_id = conn_id
        self.root = store.open_root(root_uri, conn_id)

    def __repr__(self) -> str:
        return f"ModelRegistry({store.uri_of(self.root)!r})"

    # -- paths ---------------------------------------------------------------------------------------
    def _model_dir(self, name: str) -> ObjectStoragePath:
        return self.root / "models" / validate_model_name(name)

    def _fresh(self, name: str | None = None) -> None:
        store.refresh(self._model_dir(name) if name else self.root / "models")

    def _version_dir(self, name: str, version: int) -> ObjectStoragePath:
        return self._model_dir(name) / "versions" / str(validate_version(version))

    def _alias_file(self, name: str, alias: str) -> ObjectStoragePath:
        return self._model_dir(name) / "aliases" / f"{validate_alias(alias)}.json"

    def _history_file(self, name: str, alias: str, revision: int) -> ObjectStoragePath:
        return self._model_dir(name) / "aliases" / f"{alias}.history" / f"{revision:08d}.json"

    def _open(self, uri: str) -> ObjectStoragePath:
        return store.open_root(uri, self.conn_id)

    # -- reading -------------------------------------------------------------------------------------
    def list_models(self) -> list[str]:
        self._fresh()
        models = self.root / "models"
        if not models.exists():
            return []
        names = (p.name for p in models.iterdir() if MODEL_NAME_RE.match(p.name) and p.is_dir())
        return sorted(name for name in names if self.list_versions(name))

    def list_versions(self, name: str) -> list[int]:
        """Published versions (those with a manifest), oldest first."""
        self._fresh(name)
        versions = self._model_dir(name) / "versions"
        if not versions.exists():
            return []
        found = {int(p.parent.name) for p in versions.glob("*/manifest.json") if p.parent.name.isdigit()}
        return sorted(found)

    def get_version(self, name: str, version: int) -> ModelVersion:
        vdir = self._version_dir(name, version)
        self._fresh(name)
        manifest = store.read_json(vdir / "manifest.json")
        if manifest is None:
            raise NotFoundError(f"model {name!r} has no version {version} in {store.uri_of(self.root)}")
        return self._model_version(name, int(version), manifest)

    def _model_version(self, name: str, version: int, manifest: dict[str, Any]) -> ModelVersion:
        vdir = self._version_dir(name, version)
        try:
            manifest_files(manifest)
        except ValueError as err:
            raise IntegrityError(
                f"model {name!r} version {version}: its manifest is not to be trusted and must not be used: {err}"
            ) from err
        return ModelVersion(
            name=name,
            version=version,
            uri=store.uri_of(vdir / "files"),
            manifest_uri=store.uri_of(vdir / "manifest.json"),
            manifest=manifest,
        )

    def latest_version(self, name: str) -> ModelVersion | None:
        versions = self.list_versions(name)
        return self.get_version(name, versions[-1]) if versions else None

    def resolve(self, ref: str | ModelRef, verify: bool = True) -> ModelVersion:
        """``name`` (newest version), ``name:3`` or ``name@alias`` to a published version.

        With ``verify`` (the default) every file is hashed against the manifest first, so a file swapped
        after publication (same size or not) is an IntegrityError, never a model someone goes on to use.
        """
        ref = parse_ref(ref) if isinstance(ref, str) else ref
        if ref.version is not None:
            found = self.get_version(ref.name, ref.version)
        elif ref.alias is not None:
            state = self.get_alias(ref.name, ref.alias)
            if state is None:
                raise NotFoundError(f"model {ref.name!r} has no alias {ref.alias!r}")
            found = self.get_version(ref.name, state.version)
        else:
            latest = self.latest_version(ref.name)
            if latest is None:
                raise NotFoundError(f"model {ref.name!r} has no versions in {store.uri_of(self.root)}")
            found = latest
        return self.verified(found) if verify else found

    def verified(self, mv: ModelVersion) -> ModelVersion:
        """``mv`` itself when its files hash to what its manifest records; else IntegrityError."""
        problems = self._integrity_problems(mv)
        if problems:
            raise IntegrityError(
                f"model {mv.name!r} version {mv.version} fails its sha256 check and must not be used: "
                + "; ".join(problems[:10])
            )
        return mv

    def download(self, ref: str | ModelRef, dest_uri: str) -> ModelVersion:
        """Copy a version's files to ``dest_uri``, checking each one's sha256 against the manifest as it goes."""
        mv = self.resolve(ref, verify=False)
        files = self._version_dir(mv.name, mv.version) / "files"
        dest = self._open(dest_uri)
        for path, size, sha256 in manifest_files(mv.manifest):
            entry = FileEntry(path, size, sha256)
            try:
                _copy_verified(files / entry.path, dest / entry.path, entry)
            except SourceChangedError as err:
                raise IntegrityError(
                    f"model {mv.name!r} version {mv.version}: {entry.path} does not match its manifest sha256"
                ) from err
        return mv

    # -- registering ---------------------------------------------------------------------------------
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
            "params": _jsonable(params or {}),
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
            manifest = store.read_json(path)
        return RegisterResult(self._model_version(name, version, manifest), created=created)

    def _upload(self, source: ObjectStoragePath, dest: ObjectStoragePath, entries: list[FileEntry]) -> None:
        sources = dict(walk_files(source))
        for entry in entries:
            target = dest / entry.path
            if _same_content(target, entry):
                continue  # left by an earlier attempt at this same content, byte for byte
            _copy_verified(sources[entry.path], target, entry)

    # -- aliases -------------------------------------------------------------------------------------
    def get_alias(self, name: str, alias: str) -> AliasState | None:
        head = self._alias_head(name, alias)
        return AliasState.from_dict(head) if head else None

    def list_aliases(self, name: str) -> dict[str, AliasState]:
        self._fresh(name)
        aliases = self._model_dir(name) / "aliases"
        if not aliases.exists():
            return {}
        out = {}
        for path in aliases.iterdir():
            if path.name.endswith(".json") and path.is_file():
                state = self.get_alias(name, path.name[: -len(".json")])
                if state:
                    out[state.alias] = state
        return dict(sorted(out.items()))

    def alias_history(self, name: str, alias: str) -> list[AliasState]:
        validate_alias(alias)
        self._fresh(name)
        out = []
        for revision in range(1, 10**8):
            entry = store.read_json(self._history_file(name, alias, revision))
            if entry is None:
                break
            out.append(AliasState.from_dict(entry))
        return out

    def _alias_head(self, name: str, alias: str) -> dict[str, Any] | None:
        """The alias's latest move: the pointer, rolled forward over history entries newer than it
        (a mover that crashed between the two writes leaves the pointer one step behind)."""
        self._fresh(name)
        head = store.read_json(self._alias_file(name, alias))
        revision = int(head["revision"]) if head else 0
        while (newer := store.read_json(self._history_file(name, alias, revision + 1))) is not None:
            head, revision = newer, revision + 1
        return head

    def promote(
        self,
        name: str,
        alias: str,
        version: int,
        moved_by: dict[str, Any] | None = None,
        reason: str | None = None,
        forward_only: bool = False,
    ) -> AliasState:
        """Point ``alias`` at ``version``. Concurrent moves are serialised, none is lost, all are in history.

        ``forward_only``: leave the alias where it is when it already points at a newer version (a rerun of an
        old interval must never move ``latest`` back); the current state is returned.

        The move happens when this call exclusively creates the alias's next history entry; the pointer
        file is then advanced with a conditional write that never moves it backwards.
        """
        validate_alias(alias)
        version = validate_version(version)
        self.get_version(name, version)  # rejects a missing version before anything is written
        for _ in range(MAX_ATTEMPTS):
            head = self._alias_head(name, alias)
            if head and int(head["version"]) == version:
                return AliasState.from_dict(head)  # already there: a retried promotion changes nothing
            if forward_only and head and int(head["version"]) > version:
                log.info(
                    "alias %s@%s is at version %s, newer than %d: not moved back", name, alias, head["version"], version
                )
                return AliasState.from_dict(head)
            revision = int(head["revision"]) + 1 if head else 1
            state = AliasState(
                name=name,
                alias=alias,
                version=version,
                revision=revision,
                previous_version=int(head["version"]) if head else None,
                moved_at=now_iso(),
                moved_by=_jsonable(moved_by or {}),
                reason=reason,
            )
            if store.create(self._history_file(name, alias, revision), store.dump_json(state.to_dict())):
                self._advance_pointer(name, alias, state)
                return state
        raise RegistryError(f"could not move alias {alias!r} of {name!r}: too much contention")

    def _advance_pointer(self, name: str, alias: str, state: AliasState) -> None:
        path = self._alias_file(name, alias)
        for _ in range(MAX_ATTEMPTS):
            self._fresh(name)
            data, token = store.read_for_swap(path)
            current = json.loads(data) if data else None
            if current and int(current["revision"]) >= state.revision:
                return
            if store.swap(path, store.dump_json(state.to_dict()), token):
                return
        log.warning("alias %s@%s: pointer not advanced; readers roll forward from history", name, alias)

    # -- checking ------------------------------------------------------------------------------------
    def verify(self, name: str, version: int) -> VerifyReport:
        """Recompute every file's size and sha256 against the manifest; list what differs."""
        mv = self.get_version(name, version)
        problems = self._integrity_problems(mv)
        return VerifyReport(name, int(version), len(mv.manifest.get("files", [])), problems)

    def _integrity_problems(self, mv: ModelVersion) -> list[str]:
        name, version = mv.name, mv.version
        self._fresh(name)
        files = self._version_dir(name, version) / "files"
        problems = []
        entries = manifest_files(mv.manifest)
        listed = {rel for rel, _size, _sha in entries}
        for rel, want_size, want_sha in entries:
            path = files / rel
            if not path.exists():
                problems.append(f"{rel}: missing")
                continue
            size, sha = sha256_stream(path)
            if size != want_size:
                problems.append(f"{rel}: size {size} != {want_size} in the manifest")
            if sha != want_sha:
                problems.append(f"{rel}: sha256 {sha} != {want_sha} in the manifest")
        if files.exists():
            for rel, _path in walk_files(files):
                if rel not in listed:
                    problems.append(f"{rel}: not in the manifest")
        return problems


def _same_content(path: ObjectStoragePath, entry: FileEntry) -> bool:
    """Does ``path`` hold exactly ``entry``'s bytes? Sizes alone are not enough: a same-size file could be
    planted in a version being registered."""
    try:
        if int(path.stat()["size"]) != entry.size:
            return False
        return sha256_stream(path) == (entry.size, entry.sha256)
    except FileNotFoundError:
        return False


def _copy_verified(src: ObjectStoragePath, dst: ObjectStoragePath, entry: FileEntry) -> None:
    """Stream ``src`` to ``dst`` and check the bytes still hash to what was hashed before."""
    if store.is_local(dst):
        os.makedirs(os.path.dirname(dst.path), exist_ok=True)
        tmp = f"{dst.path}.tmp-{uuid.uuid4().hex}"
        try:
            with open(tmp, "wb") as out:
                size, sha = sha256_stream(src, out.write)
                out.flush()
                os.fsync(out.fileno())
            _check(src, entry, size, sha)
            os.replace(tmp, dst.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return
    with dst.open("wb") as out:
        size, sha = sha256_stream(src, out.write)
        try:
            _check(src, entry, size, sha)
        except SourceChangedError:
            _abort_upload(out)
            raise


def _abort_upload(fh: Any) -> None:
    """Drop an S3 upload before it completes, so no object with the wrong bytes appears."""
    fh = getattr(fh, "_obj", fh)  # ObjectStoragePath wraps the fsspec file
    discard = getattr(fh, "discard", None)
    if callable(discard):
        discard()
        fh.closed = True  # s3fs's discard leaves no buffer: closing it would try to upload again


def _check(src: ObjectStoragePath, entry: FileEntry, size: int, sha: str) -> None:
    if (size, sha) != (entry.size, entry.sha256):
        raise SourceChangedError(f"{store.uri_of(src)} changed while it was being registered; try again")


def _jsonable(value: Any) -> Any:
    """Params as JSON: round-trip through json (dates and other objects become strings)."""
    return json.loads(json.dumps(dict(value) if hasattr(value, "keys") else value, default=str))
