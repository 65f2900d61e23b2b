"""Reading a registry: its models, their published versions and aliases, and whether a version's files are intact.

Layout under the root (``file://...`` or ``s3://bucket/prefix``)::

    models/<name>/versions/<N>/claim.json       version number N taken (by exclusive create)
    models/<name>/versions/<N>/files/...        the model's files, uploaded first
    models/<name>/versions/<N>/manifest.json    written last: a version without it does not exist
    models/<name>/index/<fingerprint>.json      content -> version, so identical content is registered once
    models/<name>/aliases/<alias>.json          current target of an alias
    models/<name>/aliases/<alias>.history/<R>.json   every move, revision R = 1, 2, ...

Readers never lock: a version is there once its manifest is, and an alias is its newest history entry. Every
read starts from the store itself (``store.refresh``), since other processes publish and promote meanwhile.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import ObjectStoragePath

from airflow_provider_trainium.registry import store
from airflow_provider_trainium.registry.errors import IntegrityError, NotFoundError, SourceChangedError
from airflow_provider_trainium.registry.hashing import FileEntry, sha256_stream, walk_files
from airflow_provider_trainium.registry.manifest import manifest_files
from airflow_provider_trainium.registry.names import (
    MODEL_NAME_RE,
    ModelRef,
    parse_ref,
    validate_alias,
    validate_model_name,
    validate_version,
)
from airflow_provider_trainium.registry.records import AliasState, ModelVersion, VerifyReport
from airflow_provider_trainium.registry.transfer import copy_verified


class RegistryReader:
    """One registry root, read. Every method is safe to call concurrently from several processes."""

    def __init__(self, root_uri: str, conn_id: str | None = None) -> None:
        self.root_uri = root_uri
        self.conn_id = conn_id
        self.root = store.open_root(root_uri, conn_id)

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

    # -- versions ------------------------------------------------------------------------------------
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

    def download(self, ref: str | ModelRef, dest_uri: str) -> ModelVersion:
        """Copy a version's files to ``dest_uri``, checking each one's sha256 against the manifest as it goes."""
        mv = self.resolve(ref, verify=False)
        files = self._version_dir(mv.name, mv.version) / "files"
        dest = self._open(dest_uri)
        for path, size, sha256 in manifest_files(mv.manifest):
            entry = FileEntry(path, size, sha256)
            try:
                copy_verified(files / entry.path, dest / entry.path, entry)
            except SourceChangedError as err:
                raise IntegrityError(
                    f"model {mv.name!r} version {mv.version}: {entry.path} does not match its manifest sha256"
                ) from err
        return mv

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

    # -- checking ------------------------------------------------------------------------------------
    def verify(self, name: str, version: int) -> VerifyReport:
        """Recompute every file's size and sha256 against the manifest; list what differs."""
        mv = self.get_version(name, version)
        problems = self._integrity_problems(mv)
        return VerifyReport(name, int(version), len(mv.manifest.get("files", [])), problems)

    def verified(self, mv: ModelVersion) -> ModelVersion:
        """``mv`` itself when its files hash to what its manifest records; else IntegrityError."""
        problems = self._integrity_problems(mv)
        if problems:
            raise IntegrityError(
                f"model {mv.name!r} version {mv.version} fails its sha256 check and must not be used: "
                + "; ".join(problems[:10])
            )
        return mv

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
