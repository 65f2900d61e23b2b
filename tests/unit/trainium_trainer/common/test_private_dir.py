"""The torch-xla compile cache holds native code the trainer loads: only its own user may write it."""

from __future__ import annotations

import os

import pytest

from trainium_trainer.common.private_dir import ensure_private_dir, private_dir_problem


def test_a_new_cache_directory_is_created_private(tmp_path):
    made = ensure_private_dir(tmp_path / "cache" / "rank0", what="cache")
    assert (made.stat().st_mode & 0o777) == 0o700
    assert private_dir_problem(made) is None


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_directory_others_may_write_is_refused(tmp_path, mode):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(mode)
    with pytest.raises(ValueError, match="writable by group or others"):
        ensure_private_dir(cache / "rank0", what="the torch-xla compile cache")


def test_a_parent_others_may_write_is_refused(tmp_path):
    """Whoever may write the parent can replace the cache directory itself."""
    parent = tmp_path / "shared"
    parent.mkdir()
    (parent / "rank0").mkdir(mode=0o700)
    parent.chmod(0o777)
    with pytest.raises(ValueError, match="shared is writable"):
        ensure_private_dir(parent / "rank0", what="cache")


def test_a_symlinked_cache_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "cache").mkdir(mode=0o700)
    (tmp_path / "cache" / "rank0").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="symbolic link"):
        ensure_private_dir(tmp_path / "cache" / "rank0", what="cache")


def test_a_directory_of_another_user_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("changing a directory's owner needs root")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    os.chown(cache, 65534, 65534)
    assert "owned by uid 65534" in (private_dir_problem(cache) or "")
