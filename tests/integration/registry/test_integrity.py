"""Registry reads trust nothing they find: sha256 is checked on resolve, download and by the sensor, a
resumed registration compares hashes (not sizes), and ``latest`` never moves backwards."""

from __future__ import annotations

import json

import pytest

from airflow_provider_trainium.registry import IntegrityError, ModelRegistry, NotFoundError, store
from airflow_provider_trainium.registry.hashing import fingerprint, hash_tree
from airflow_provider_trainium.triggers.registry import find_model


def _swap_same_size(backend, uri: str, rel: str) -> None:
    """Replace one published file by other bytes of exactly the same length (what a job with write access
    to the registry prefix could do)."""
    path = backend.path(f"{uri}/{rel}")
    original = path.read_bytes()
    path.write_bytes(bytes(b ^ 0xFF for b in original))
    assert len(path.read_bytes()) == len(original)


def test_a_same_size_swapped_file_fails_resolve_download_and_the_sensor(registry, backend, trained_dir):
    source, _ = trained_dir("a")
    mv = registry.register("m", source).version
    registry.promote("m", "latest", 1)
    assert registry.resolve("m@latest").version == 1  # intact: resolves
    _swap_same_size(backend, mv.uri, "model.safetensors")

    for ref in ("m", "m:1", "m@latest"):
        with pytest.raises(IntegrityError, match=r"model.safetensors: sha256"):
            registry.resolve(ref)
    with pytest.raises(IntegrityError, match="model.safetensors"):
        registry.download("m:1", f"{backend.scratch_uri}/download")
    with pytest.raises(IntegrityError):
        find_model(registry, "m", 1, None, 0)
    with pytest.raises(IntegrityError):
        find_model(registry, "m", None, "latest", 0)
    assert not registry.verify("m", 1).ok


def test_download_copies_a_verified_version(registry, backend, trained_dir):
    source, files = trained_dir("a")
    registry.register("m", source)
    dest = f"{backend.scratch_uri}/download"
    assert registry.download("m:1", dest).version == 1
    assert backend.path(f"{dest}/model.safetensors").read_bytes() == files["model.safetensors"]


def test_a_resumed_registration_replaces_a_planted_same_size_file(registry, backend, trained_dir):
    """A registration that crashed after claiming version 1 left its directory open; something planted a
    file of the right size there. The next registration of the same content compares hashes, so what it
    publishes is the trained bytes, and the published version verifies."""
    source, files = trained_dir("a")
    fp = fingerprint(hash_tree(store.open_root(source, backend.conn_id)))
    model_dir = registry.root / "models" / "m"
    assert store.create(model_dir / "versions" / "1" / "claim.json", store.dump_json({"fingerprint": fp}))
    assert store.create(model_dir / "index" / f"{fp}.json", store.dump_json({"version": 1}))
    planted = bytes(b ^ 0xFF for b in files["model.safetensors"])
    target = model_dir / "versions" / "1" / "files" / "model.safetensors"
    if backend.name == "local":
        import os

        os.makedirs(os.path.dirname(target.path), exist_ok=True)
    target.write_bytes(planted)

    result = registry.register("m", source)
    assert (result.version.version, result.created) == (1, True)
    assert registry.verify("m", 1).ok
    assert target.read_bytes() == files["model.safetensors"]
    assert registry.resolve("m:1").version == 1


def test_latest_never_moves_backwards_on_a_rerun(registry, trained_dir):
    """Backfill two intervals (latest -> 2), clear the first and rerun it: its version already exists, is
    reported as existing, and ``latest`` stays at 2."""
    first = {"dag_id": "d", "run_id": "backfill__2026-01-01", "task_id": "register", "map_index": -1}
    second = {**first, "run_id": "backfill__2026-01-02"}
    day1, _ = trained_dir("day1")
    day2, _ = trained_dir("day2")
    v1 = registry.register("m", day1, lineage=first)
    registry.promote("m", "latest", v1.version.version, forward_only=True)
    v2 = registry.register("m", day2, lineage=second)
    registry.promote("m", "latest", v2.version.version, forward_only=True)
    assert registry.get_alias("m", "latest").version == 2

    rerun = registry.register("m", day1, lineage={**first, "try_number": 2})  # cleared: same run id
    assert (rerun.version.version, rerun.created) == (1, False)
    state = registry.promote("m", "latest", rerun.version.version, forward_only=True)
    assert state.version == 2 and registry.get_alias("m", "latest").version == 2
    assert [s.version for s in registry.alias_history("m", "latest")] == [1, 2]
    # a deliberate rollback is still possible, and recorded
    assert registry.promote("m", "latest", 1, reason="rollback").version == 1


def test_a_missing_version_is_not_found_not_an_integrity_error(tmp_path):
    with pytest.raises(NotFoundError):
        ModelRegistry(tmp_path.as_uri()).resolve("m:1")


@pytest.mark.parametrize("bad_path", ["../escaped.bin", "/etc/escaped.bin", "a/../../escaped.bin", "a//b", "./a"])
def test_a_tampered_manifest_path_is_refused_and_nothing_leaves_the_destination(
    registry, backend, trained_dir, bad_path
):
    """Whoever can write a version's manifest.json must not make ``download`` write outside its destination
    (nor the integrity check read outside the version)."""
    source, _ = trained_dir("a")
    mv = registry.register("m", source).version
    manifest_path = backend.path(mv.manifest_uri)
    manifest = json.loads(manifest_path.read_text())
    manifest["files"][0]["path"] = bad_path
    manifest_path.write_text(json.dumps(manifest))
    dest = f"{backend.scratch_uri}/deep/download"

    with pytest.raises(IntegrityError, match="manifest is not to be trusted.*segment|relative POSIX"):
        registry.download("m:1", dest)
    with pytest.raises(IntegrityError, match="manifest is not to be trusted"):
        registry.verify("m", 1)
    assert not backend.path(f"{backend.scratch_uri}/deep").exists()
    assert not backend.path(f"{backend.scratch_uri}/escaped.bin").exists()
