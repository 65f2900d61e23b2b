"""The end-of-run Hugging Face export, and the compile trial's share of it.

On neuronx-distributed the export's tensor-parallel gathers are XLA graphs, so the compile trial runs them
(writing nothing) to put them in the cache; the real run's export then compiles nothing
(tests/unit/trainium_trainer/llama/test_neuron.py checks that on XLA-CPU). Without NxD the export is host copies only.
"""

import argparse
import types

import pytest
import torch
from safetensors.torch import load_file

from trainium_trainer.llama import neuron, train
from trainium_trainer.llama.model import new_model
from trainium_trainer.llama.presets import llama_config


@pytest.fixture
def exports(monkeypatch):
    calls = []

    def save_full_model(model, config, output_uri, write, max_shard_bytes):
        calls.append({"output_uri": output_uri, "write": write, "max_shard_bytes": max_shard_bytes})
        return []

    monkeypatch.setattr(neuron, "save_full_model", save_full_model)
    return calls


def args_for(output_uri, compile_only, max_shard_bytes=123):
    return argparse.Namespace(output_uri=output_uri, compile_only=compile_only, max_shard_bytes=max_shard_bytes)


class HostRuntime:
    def __init__(self):
        self.copied = 0

    def to_cpu(self, value):
        self.copied += 1
        return value


@pytest.mark.parametrize("output", [True, False])
def test_the_compile_trial_runs_the_nxd_gathers_on_every_rank_and_no_rank_writes(exports, tmp_path, output):
    out = (tmp_path / "trial").as_uri() if output else None  # the trial may have no output URI at all
    for is_main in (True, False):
        train.export_model(args_for(out, True), HostRuntime(), types.SimpleNamespace(is_main=is_main),
                           object(), llama_config("tiny", 64), use_nxd=True)  # fmt: skip
    assert [c["write"] for c in exports] == [False, False]
    assert not (tmp_path / "trial").exists()


def test_the_real_nxd_export_has_every_rank_gather_and_rank_0_write(exports, tmp_path):
    out = (tmp_path / "out").as_uri()
    for is_main in (True, False):
        train.export_model(args_for(out, False), HostRuntime(), types.SimpleNamespace(is_main=is_main),
                           object(), llama_config("tiny", 64), use_nxd=True)  # fmt: skip
    assert exports == [{"output_uri": out, "write": True, "max_shard_bytes": 123},
                       {"output_uri": out, "write": False, "max_shard_bytes": 123}]  # fmt: skip


@pytest.mark.model
def test_without_nxd_only_the_main_rank_of_a_real_run_copies_and_writes(exports, tmp_path):
    config = llama_config("tiny", 64)
    model = new_model(config, 0)
    trial, rank_1, main = HostRuntime(), HostRuntime(), HostRuntime()
    train.export_model(args_for((tmp_path / "trial").as_uri(), True), trial, types.SimpleNamespace(is_main=True),
                       model, config, use_nxd=False)  # fmt: skip
    train.export_model(args_for((tmp_path / "out").as_uri(), False), rank_1, types.SimpleNamespace(is_main=False),
                       model, config, use_nxd=False)  # fmt: skip
    assert trial.copied == rank_1.copied == 0 and not (tmp_path / "trial").exists() and not (tmp_path / "out").exists()
    train.export_model(args_for((tmp_path / "out").as_uri(), False, 10**9), main, types.SimpleNamespace(is_main=True),
                       model, config, use_nxd=False)  # fmt: skip
    assert main.copied == 1 and not exports
    saved = load_file(tmp_path / "out" / "model.safetensors")
    torch.testing.assert_close(saved["model.norm.weight"], model.model.norm.weight.detach())
