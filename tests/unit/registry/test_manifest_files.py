"""A manifest's file list is checked on read: every path stays inside its version."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.registry.manifest import file_path_problem, manifest_files

SHA = "0" * 64


@pytest.mark.parametrize("path", ["model.safetensors", "tokenizer/vocab.json", "a/b/c.bin", "ckpt..1", ".hidden"])
def test_relative_paths_inside_the_version_pass(path):
    assert file_path_problem(path) is None
    assert manifest_files({"files": [{"path": path, "size": 1, "sha256": SHA}]}) == [(path, 1, SHA)]


@pytest.mark.parametrize(
    "path", ["", "..", "../x", "a/../../x", "/abs", "a//b", "./a", "a/.", "a\\..\\b", "x\x00y", "s3://b/k", 7, None]
)
def test_paths_that_could_leave_the_version_are_refused(path):
    assert file_path_problem(path) is not None
    with pytest.raises(ValueError):
        manifest_files({"files": [{"path": path, "size": 1, "sha256": SHA}]})


@pytest.mark.parametrize(
    "entry",
    [
        {"path": "a", "size": -1, "sha256": SHA},
        {"path": "a", "size": True, "sha256": SHA},
        {"path": "a", "size": "1", "sha256": SHA},
        {"path": "a", "size": 1, "sha256": "F" * 64},
        {"path": "a", "size": 1},
        "a",
    ],
)
def test_malformed_entries_are_refused(entry):
    with pytest.raises(ValueError):
        manifest_files({"files": [entry]})


def test_a_path_listed_twice_is_refused():
    entry = {"path": "a", "size": 1, "sha256": SHA}
    with pytest.raises(ValueError, match="twice"):
        manifest_files({"files": [entry, entry]})
