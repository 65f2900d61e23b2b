"""A hold-out set's manifest: the data job records and seals what it wrote; the evaluation reads each file once and
refuses, by name, one that differs from the manifest."""

from __future__ import annotations

import json

import pytest

from trainium_trainer import boundary
from trainium_trainer.common.errors import BadInputError
from trainium_trainer.common.holdout import manifest, read_holdout, seal_uri, write_manifest

FILES = {"index.json": b'{"eval": []}', "eval/shard-00000.npy": b"\x01" * 32, "tokenizer.json": b"{}"}
KEY_A, KEY_B = "aa" * 32, "bb" * 32


def test_the_same_files_give_the_same_manifest_whatever_job_seals_it(tmp_path, monkeypatch):
    monkeypatch.setenv(boundary.ENV_EVIDENCE_KEY, KEY_A)
    a = write_manifest(tmp_path.as_uri(), FILES)
    monkeypatch.setenv(boundary.ENV_EVIDENCE_KEY, KEY_B)  # another run's data job: the same set, its own seal
    b = write_manifest(tmp_path.as_uri(), dict(reversed(FILES.items())))
    assert a == b == manifest(FILES) and list(a["files"]) == sorted(FILES)
    sealed_a = json.loads((tmp_path / seal_uri("", KEY_A).lstrip("/")).read_text())
    sealed_b = json.loads((tmp_path / seal_uri("", KEY_B).lstrip("/")).read_text())
    assert sealed_a[boundary.SEAL_FIELD] == boundary.seal(a, KEY_A) != sealed_b[boundary.SEAL_FIELD]
    assert (
        boundary.record_fingerprint(sealed_a) == boundary.record_fingerprint(sealed_b) == boundary.record_fingerprint(a)
    )
    assert boundary.key_id(KEY_A) not in KEY_A and len(boundary.key_id(KEY_A)) == 32  # names the key, reveals none


def write_set(root, files=FILES) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    write_manifest(root.as_uri(), files)


def test_the_evaluation_reads_the_files_the_manifest_lists(tmp_path, monkeypatch):
    monkeypatch.delenv(boundary.ENV_EVIDENCE_KEY, raising=False)
    write_set(tmp_path)
    (tmp_path / "planted.npy").write_bytes(b"\x09")  # not listed: never read
    files, fingerprint = read_holdout(tmp_path.as_uri())
    assert files == FILES and fingerprint == boundary.record_fingerprint(manifest(FILES))
    assert not (tmp_path / boundary.HOLDOUT_SEALS_DIR).exists()  # no key, no seal


@pytest.mark.parametrize(
    ("attack", "match"),
    [
        (lambda root: (root / "eval/shard-00000.npy").write_bytes(b"\x02" * 32), "eval/shard-00000.npy does not match"),
        (lambda root: (root / "index.json").write_bytes(b'{"eval": [1]}'), "index.json does not match"),
        (lambda root: (root / "tokenizer.json").unlink(), "tokenizer.json is missing"),
        (lambda root: (root / boundary.HOLDOUT_MANIFEST_FILE).unlink(), "no hold-out manifest"),
        (
            lambda root: (root / boundary.HOLDOUT_MANIFEST_FILE).write_text(
                json.dumps({**manifest(FILES), "files": {"../../etc/passwd": {"size": 1, "sha256": "x"}}})
            ),
            "not a file under the set",
        ),
    ],
    ids=["a shard swapped", "the index swapped", "a file removed", "the manifest removed", "a path outside"],
)
def test_a_file_swapped_after_the_data_job_is_refused_by_name(tmp_path, monkeypatch, attack, match):
    monkeypatch.delenv(boundary.ENV_EVIDENCE_KEY, raising=False)
    write_set(tmp_path)
    attack(tmp_path)
    with pytest.raises(BadInputError, match=match):
        read_holdout(tmp_path.as_uri())


def test_files_and_manifest_swapped_together_read_but_name_another_fingerprint(tmp_path, monkeypatch):
    """What the evaluation cannot see on its own: the provider compares the fingerprint with the sealed one."""
    monkeypatch.delenv(boundary.ENV_EVIDENCE_KEY, raising=False)
    write_set(tmp_path)
    _, genuine = read_holdout(tmp_path.as_uri())
    write_set(tmp_path, {**FILES, "eval/shard-00000.npy": b"\x00" * 32})  # easy data, its own manifest
    _, swapped = read_holdout(tmp_path.as_uri())
    assert swapped != genuine
