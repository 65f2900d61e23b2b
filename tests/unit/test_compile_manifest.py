"""Compile-cache manifests on ``file://``: what a recorded cache is compared on, and what a change of it refuses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airflow_provider_trainium import compile_manifest
from airflow_provider_trainium.compile_manifest import CompileCacheChanged
from tests.conftest import write_tree

BY = {"dag_id": "d", "run_id": "r", "task_id": "compile"}
#: What a trial leaves: a torch-xla CPU cache per rank, an inductor cache, a key record (not an entry).
TRIAL: dict[str, str | bytes] = {
    "rank0/1229": b"graph-a",
    "rank1/1229": b"graph-a",
    "native/inductor/fxgraph/ab/entry": b"kernel",
    "keys/k1.json": b'{"key": "k1"}',
}


@pytest.fixture
def world(tmp_path: Path) -> tuple[str, Path]:
    """The artifact root and a cache a trial filled, outside it."""
    cache = write_tree(tmp_path / "cache", TRIAL)
    return (tmp_path / "root").as_uri(), cache


def test_a_recorded_cache_lists_every_entry_by_its_hash_under_the_manifests_prefix(world):
    root, cache = world
    manifest = compile_manifest.record(root, cache.as_uri(), BY, key="k1")
    where = Path(compile_manifest.manifest_uri(root, cache.as_uri()).removeprefix("file://"))
    assert where.parent == Path(root.removeprefix("file://")) / "compile-manifests"
    assert json.loads(where.read_text()) == manifest
    assert sorted(manifest["entries"]) == ["native/inductor/fxgraph/ab/entry", "rank0/1229", "rank1/1229"]
    assert manifest["entries"]["rank0/1229"]["size"] == len(b"graph-a")
    assert set(manifest["keys"]) == {"k1"} and manifest["keys"]["k1"]["task_id"] == "compile"
    assert compile_manifest.verify(root, cache.as_uri())[1] == compile_manifest.CacheChanges()


def test_a_changed_entry_is_refused_by_name_with_how_to_recover(world):
    root, cache = world
    compile_manifest.record(root, cache.as_uri(), BY, key="k1")
    (cache / "rank1" / "1229").write_bytes(b"graph-b")  # same size, other bytes
    with pytest.raises(CompileCacheChanged, match=r"1 entry changed \(rank1/1229\).*d/r/compile.*Delete the changed"):
        compile_manifest.verify(root, cache.as_uri())


def test_a_removed_entry_is_refused_unless_the_caller_compiles_it_again(world):
    root, cache = world
    compile_manifest.record(root, cache.as_uri(), BY, key="k1")
    (cache / "rank0" / "1229").unlink()
    with pytest.raises(CompileCacheChanged, match=r"1 entry removed \(rank0/1229\).*Run the compile task again"):
        compile_manifest.verify(root, cache.as_uri())
    assert compile_manifest.verify(root, cache.as_uri(), removed_ok=True)[1].removed == ("rank0/1229",)


def test_an_added_entry_and_a_new_key_record_pass_and_are_reported(world):
    root, cache = world
    compile_manifest.record(root, cache.as_uri(), BY, key="k1")
    write_tree(cache, {"rank0/5150": b"an eval graph", "keys/k2.json": b"{}"})
    manifest, changes = compile_manifest.verify(root, cache.as_uri())
    assert manifest is not None and changes == compile_manifest.CacheChanges(added=("rank0/5150",))


def test_a_file_replaced_by_a_symlink_is_a_change_and_links_are_never_followed(world, tmp_path):
    root, cache = world
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", cache / "linked")  # a folder link: listed, not walked
    compile_manifest.record(root, cache.as_uri(), BY, key="k1")
    write_tree(tmp_path / "elsewhere", {"planted": b"x"})
    assert compile_manifest.verify(root, cache.as_uri())[1] == compile_manifest.CacheChanges()
    (cache / "rank0" / "1229").unlink()
    os.symlink(tmp_path / "elsewhere" / "planted", cache / "rank0" / "1229")
    with pytest.raises(CompileCacheChanged, match=r"changed \(rank0/1229\)"):
        compile_manifest.verify(root, cache.as_uri())


def test_a_cache_no_compile_task_recorded_has_no_manifest_and_is_not_recorded_by_a_refresh(world):
    root, cache = world
    assert compile_manifest.verify(root, cache.as_uri()) == (None, compile_manifest.CacheChanges())
    assert compile_manifest.refresh(root, cache.as_uri(), BY) is None
    assert compile_manifest.read_manifest(root, cache.as_uri()) is None


def test_a_refresh_records_what_a_job_left_and_keeps_the_keys(world):
    root, cache = world
    compile_manifest.record(root, cache.as_uri(), BY, key="k1")
    (cache / "rank0" / "1229").write_bytes(b"recompiled by the training run")
    refreshed = compile_manifest.refresh(root, cache.as_uri(), {**BY, "task_id": "train"})
    assert refreshed is not None and set(refreshed["keys"]) == {"k1"}
    assert refreshed["recorded_by"]["task_id"] == "train"
    assert compile_manifest.verify(root, cache.as_uri())[1] == compile_manifest.CacheChanges()


def test_each_cache_has_its_own_manifest_and_one_of_another_cache_is_refused(world, tmp_path):
    root, cache = world
    other = write_tree(tmp_path / "other", {"rank0/1": b"x"})
    assert compile_manifest.manifest_uri(root, cache.as_uri()) != compile_manifest.manifest_uri(root, other.as_uri())
    compile_manifest.record(root, other.as_uri(), BY, key="k9")
    mine = Path(compile_manifest.manifest_uri(root, cache.as_uri()).removeprefix("file://"))
    theirs = Path(compile_manifest.manifest_uri(root, other.as_uri()).removeprefix("file://"))
    mine.write_bytes(theirs.read_bytes())
    with pytest.raises(CompileCacheChanged, match="is not this cache's"):
        compile_manifest.verify(root, cache.as_uri())


def test_many_refused_entries_are_named_five_at_most():
    changes = compile_manifest.CacheChanges(changed=tuple(f"e{i}" for i in range(7)))
    assert compile_manifest.describe(changes) == "7 entries changed (e0, e1, e2, e3, e4 and 2 more)"
