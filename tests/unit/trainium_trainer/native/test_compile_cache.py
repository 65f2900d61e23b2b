"""Where the native stack's torch.compile cache goes: under the job's compile cache when that is a directory."""

from __future__ import annotations

import pytest

from trainium_trainer.native.compile_cache import INDUCTOR_CACHE_ENV, NEFF_CACHE_ENV, configure_compile_cache


@pytest.mark.parametrize(("device", "variable", "subdir"),
                         [("neuron", NEFF_CACHE_ENV, "neff"), ("cpu", INDUCTOR_CACHE_ENV, "inductor")])  # fmt: skip
def test_a_directory_cache_holds_the_devices_compile_cache(tmp_path, device, variable, subdir):
    environ: dict[str, str] = {}
    cache = configure_compile_cache(device, (tmp_path / "cache").as_uri(), environ)
    assert environ == {variable: str(tmp_path / "cache" / "native" / subdir)}
    assert (tmp_path / "cache" / "native" / subdir).is_dir()
    assert cache.persistent and cache.directory == environ[variable]
    assert cache.backend == {"neuron": "neuron", "cpu": "inductor"}[device]


def test_no_cache_uri_changes_nothing():
    environ: dict[str, str] = {}
    assert configure_compile_cache("cpu", None, environ).persistent is False
    assert environ == {}
