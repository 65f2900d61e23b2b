"""The registry on a local root and on a moto S3 bucket: versions, idempotence, crash safety, verify."""

from __future__ import annotations

import hashlib
import json
import threading

import pytest

from airflow_provider_trainium.registry import (
    InvalidNameError,
    ModelRegistry,
    NotFoundError,
    RegistryError,
)


def test_register_publishes_files_and_manifest(registry, backend, trained_dir):
    source, files = trained_dir("a")
    dataset, _ = trained_dir("data", extra={"train.idx": b"\x00" * 100})
    lineage = {"dag_id": "train_dag", "run_id": "manual__1", "task_id": "register", "map_index": -1}
    result = registry.register(
        "mnist-mlp",
        source,
        params={"lr": 0.01, "epochs": 2},
        lineage={**lineage, "try_number": 1, "logical_date": "2026-11-01T00:00:00+00:00"},
        dataset_uri=dataset,
        image="123.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "ab" * 32,
    )
    assert result.created is True
    mv = result.version
    assert (mv.name, mv.version) == ("mnist-mlp", 1)
    assert mv.uri == f"{backend.root_uri}/models/mnist-mlp/versions/1/files"
    assert mv.manifest_uri == f"{backend.root_uri}/models/mnist-mlp/versions/1/manifest.json"

    manifest = registry.get_version("mnist-mlp", 1).manifest
    assert {f["path"]: (f["size"], f["sha256"]) for f in manifest["files"]} == {
        rel: (len(data), hashlib.sha256(data).hexdigest()) for rel, data in files.items()
    }
    assert manifest["source"] == {
        "uri": source,
        **lineage,
        "try_number": 1,
        "logical_date": "2026-11-01T00:00:00+00:00",
        "job_hash": "job-a",
    }
    assert manifest["params"] == {"lr": 0.01, "epochs": 2}
    assert manifest["metrics"]["accuracy"] == 0.93
    assert "history" not in manifest["metrics"]  # the step history stays in metrics.json
    assert manifest["software"] == {"torch": "2.9.0", "neuron_sdk": "2.31.0", "trainer_revision": "abc123"}
    assert manifest["image"]["digest"] == "sha256:" + "ab" * 32
    assert manifest["dataset"]["uri"] == dataset
    assert manifest["dataset"]["method"] == "sha256-of-files"
    assert len(manifest["dataset"]["sha256"]) == 64
    # The published files are the source's bytes.
    for rel, data in files.items():
        assert backend.path(f"{mv.uri}/{rel}").read_bytes() == data
    assert registry.list_models() == ["mnist-mlp"]
    assert registry.resolve("mnist-mlp").version == 1


def test_reregister_same_content_is_idempotent(registry, trained_dir):
    first, _ = trained_dir("a")
    copy, _ = trained_dir("a")  # same bytes, other directory (another run that produced the same model)
    other, _ = trained_dir("b")
    run = {"dag_id": "d", "run_id": "r1", "task_id": "register", "map_index": -1}

    assert registry.register("m", first, lineage=run).version.version == 1
    retry = registry.register("m", first, lineage={**run, "try_number": 2})
    assert (retry.version.version, retry.created) == (1, False)  # even the same task's retry: it exists
    again = registry.register("m", copy, lineage={**run, "run_id": "r2"})
    assert (again.version.version, again.created) == (1, False)
    assert registry.register("m", other).version.version == 2
    assert registry.list_versions("m") == [1, 2]


class CrashBeforeManifest(ModelRegistry):
    """Dies after the files are uploaded and before the manifest is written."""

    def _write_manifest(self, name, version, manifest):
        raise KeyboardInterrupt("worker killed")


def test_crash_between_files_and_manifest_leaves_nothing_visible(registry, backend, trained_dir):
    source, files = trained_dir("a")
    crashing = CrashBeforeManifest(backend.root_uri, backend.conn_id)
    with pytest.raises(KeyboardInterrupt):
        crashing.register("m", source)
    # The files did reach the store ...
    uploaded = backend.path(f"{backend.root_uri}/models/m/versions/1/files/model.safetensors")
    assert uploaded.read_bytes() == files["model.safetensors"]
    # ... yet to readers there is no version.
    assert registry.list_versions("m") == []
    assert registry.list_models() == []
    with pytest.raises(NotFoundError):
        registry.get_version("m", 1)
    with pytest.raises(NotFoundError):
        registry.resolve("m")
    with pytest.raises(NotFoundError):
        registry.promote("m", "production", 1)
    # The next registration of that content finishes the claimed version instead of leaving a gap.
    result = registry.register("m", source)
    assert (result.version.version, result.created) == (1, True)
    assert registry.verify("m", 1).ok


def test_verify_detects_checksum_mismatch(registry, backend, trained_dir):
    source, files = trained_dir("a")
    mv = registry.register("m", source).version
    assert registry.verify("m", 1).ok
    tampered = files["model.safetensors"][:-1] + b"\xff"  # same size, other bytes
    backend.path(f"{mv.uri}/model.safetensors").write_bytes(tampered)
    backend.path(f"{mv.uri}/tokenizer/vocab.txt").unlink()
    backend.path(f"{mv.uri}/stray.bin").write_bytes(b"x")
    report = registry.verify("m", 1)
    assert not report.ok
    assert any(p.startswith("model.safetensors: sha256") for p in report.problems)
    assert "tokenizer/vocab.txt: missing" in report.problems
    assert "stray.bin: not in the manifest" in report.problems
    assert not any(p.startswith("model_config.json") for p in report.problems)


def test_concurrent_registrations_get_distinct_versions(registry, trained_dir):
    sources = [trained_dir(f"s{i}")[0] for i in range(4)]
    duplicate = trained_dir("s0")[0]
    results: list = []
    barrier = threading.Barrier(len(sources) + 1)

    def register(uri):
        barrier.wait()
        results.append(registry.register("m", uri))

    threads = [threading.Thread(target=register, args=(u,)) for u in [*sources, duplicate]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 5
    by_source = {r.version.manifest["fingerprint"]: r.version.version for r in results}
    assert sorted(by_source.values()) == registry.list_versions("m")  # one version per distinct content
    assert len(by_source) == 4
    assert sum(r.created for r in results) == 4  # the duplicate found the existing version
    for version in registry.list_versions("m"):
        assert registry.verify("m", version).ok


def test_concurrent_promotions_are_all_recorded(registry, trained_dir):
    versions = [registry.register("m", trained_dir(f"v{i}")[0]).version.version for i in range(5)]
    barrier = threading.Barrier(len(versions))
    errors: list[BaseException] = []

    def promote(version):
        barrier.wait()
        try:
            registry.promote("m", "production", version, moved_by={"thread": version})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=promote, args=(v,)) for v in versions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    history = registry.alias_history("m", "production")
    assert [h.revision for h in history] == [1, 2, 3, 4, 5]
    assert sorted(h.version for h in history) == versions  # no promotion lost
    assert [h.previous_version for h in history] == [None] + [h.version for h in history[:-1]]
    current = registry.get_alias("m", "production")
    assert current == history[-1]
    pointer = json.loads((registry.root / "models/m/aliases/production.json").read_bytes())
    assert pointer["revision"] == 5 and pointer["version"] == current.version
    assert registry.resolve("m@production").version == current.version


def test_promote_again_is_a_noop_and_history_keeps_moves(registry, trained_dir):
    v1 = registry.register("m", trained_dir("a")[0]).version.version
    v2 = registry.register("m", trained_dir("b")[0]).version.version
    registry.promote("m", "production", v1)
    registry.promote("m", "production", v1)  # retried task: nothing new
    registry.promote("m", "production", v2)
    registry.promote("m", "production", v1)  # rollback is a move like any other
    assert [(h.revision, h.version) for h in registry.alias_history("m", "production")] == [
        (1, v1),
        (2, v2),
        (3, v1),
    ]
    assert {a: s.version for a, s in registry.list_aliases("m").items()} == {"production": v1}


class PointerNeverAdvances(ModelRegistry):
    """A mover that dies right after its history entry, before updating the alias file."""

    def _advance_pointer(self, name, alias, state):
        return None


def test_alias_readers_roll_forward_over_a_stale_pointer(registry, backend, trained_dir):
    v1 = registry.register("m", trained_dir("a")[0]).version.version
    v2 = registry.register("m", trained_dir("b")[0]).version.version
    v3 = registry.register("m", trained_dir("c")[0]).version.version
    registry.promote("m", "production", v1)
    PointerNeverAdvances(backend.root_uri, backend.conn_id).promote("m", "production", v2)
    pointer = registry.root / "models/m/aliases/production.json"
    assert json.loads(pointer.read_bytes())["version"] == v1  # stale file ...
    assert registry.get_alias("m", "production").version == v2  # ... but readers see the move
    registry.promote("m", "production", v3)
    assert json.loads(pointer.read_bytes())["revision"] == 3
    assert [h.version for h in registry.alias_history("m", "production")] == [v1, v2, v3]


def test_alias_to_missing_version_is_rejected(registry, trained_dir):
    registry.register("m", trained_dir("a")[0])
    with pytest.raises(NotFoundError, match="no version 7"):
        registry.promote("m", "production", 7)
    with pytest.raises(NotFoundError):
        registry.promote("unknown-model", "production", 1)
    assert registry.get_alias("m", "production") is None
    assert registry.alias_history("m", "production") == []
    assert not (registry.root / "models/m/aliases").exists()


@pytest.mark.parametrize(
    "name", ["", "Mnist", "../etc", "a/b", "a..b", "-lead", "sp ace", "x" * 129, "trailing.", "a@b", "a:1"]
)
def test_bad_model_names_are_rejected_before_any_write(registry, trained_dir, name):
    source, _ = trained_dir("a")
    with pytest.raises(InvalidNameError):
        registry.register(name, source)
    with pytest.raises(InvalidNameError):
        registry.promote(name, "production", 1)
    assert not (registry.root / "models").exists()


@pytest.mark.parametrize("alias", ["", "1prod", "Prod", "prod/x", "prod.json", "../x"])
def test_bad_aliases_are_rejected(registry, trained_dir, alias):
    registry.register("m", trained_dir("a")[0])
    with pytest.raises(InvalidNameError):
        registry.promote("m", alias, 1)
    assert not (registry.root / "models/m/aliases").exists()


def test_refs_and_base_model_pinning(registry, trained_dir):
    registry.register("base", trained_dir("a")[0])
    registry.promote("base", "production", 1)
    tuned = registry.register("tuned", trained_dir("b")[0], base_model="base@production").version
    assert tuned.manifest["base_model"]["name"] == "base"
    assert tuned.manifest["base_model"]["version"] == 1
    hf = registry.register("tuned", trained_dir("c")[0], base_model="meta-llama/Llama-2-7b-hf").version
    assert hf.manifest["base_model"] == {"ref": "meta-llama/Llama-2-7b-hf"}
    with pytest.raises(NotFoundError):
        registry.register("tuned", trained_dir("d")[0], base_model="base:9")
    with pytest.raises(NotFoundError):
        registry.resolve("base@staging")


def test_missing_metrics_and_empty_source_fail_clearly(registry, backend, trained_dir):
    source, _ = trained_dir("a")
    with pytest.raises(RegistryError, match="metrics file 'eval.json' not found"):
        registry.register("m", source, metrics_file="eval.json")
    assert registry.register("m", source, metrics_file=None).version.manifest["metrics"] == {}
    with pytest.raises(FileNotFoundError):
        registry.register("m", f"{backend.scratch_uri}/does-not-exist")
