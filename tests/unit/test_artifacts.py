"""The artifact reader on local files: plain paths, file:// URIs, missing files and refused schemes."""

from __future__ import annotations

import pytest

from airflow_provider_trainium import artifacts


def test_plain_paths_and_file_uris_read_the_same(tmp_path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "metrics.json").write_text('{"loss": 0.5}')
    (tmp_path / "out" / "b.bin").write_bytes(b"xy")
    for base in (str(tmp_path / "out"), (tmp_path / "out").as_uri() + "/"):
        assert artifacts.read_json(f"{base.rstrip('/')}/metrics.json") == {"loss": 0.5}
        assert artifacts.exists(base)
        assert artifacts.list_uris(base) == [
            (tmp_path / "out" / "b.bin").as_uri(),
            (tmp_path / "out" / "metrics.json").as_uri(),
        ]
    assert artifacts.read_bytes((tmp_path / "out" / "b.bin").as_uri()) == b"xy"


def test_listing_keeps_only_files_or_only_folders(tmp_path) -> None:
    (tmp_path / "out" / "stream" / "train").mkdir(parents=True)
    (tmp_path / "out" / "stream" / "notes.txt").write_text("not a source")
    base = (tmp_path / "out" / "stream").as_uri()
    assert artifacts.list_uris(base, kind="dir") == [f"{base}/train"]
    assert artifacts.list_uris(base, kind="file") == [f"{base}/notes.txt"]
    assert artifacts.list_uris(base) == [f"{base}/notes.txt", f"{base}/train"]


def test_missing_files(tmp_path) -> None:
    uri = (tmp_path / "nothing.json").as_uri()
    assert not artifacts.exists(uri)
    assert artifacts.list_uris((tmp_path / "none").as_uri()) == []
    assert artifacts.read_json(uri, missing_ok=True) is None
    with pytest.raises(FileNotFoundError, match="nothing.json"):
        artifacts.read_bytes(uri)


def test_other_schemes_are_refused() -> None:
    with pytest.raises(artifacts.ArtifactURIError, match="gs://"):
        artifacts.read_json("gs://bucket/metrics.json")
    assert artifacts.is_remote("s3://bucket/x") and not artifacts.is_remote("/tmp/x")
