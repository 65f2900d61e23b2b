"""The Llama export on real torch-xla (PJRT_DEVICE=CPU): the compile trial's pass runs every graph the writing
export runs. Integration, not unit: it starts a torch-xla device. The stand-ins for neuronx-distributed are the
unit tests' (tests/unit/trainium_trainer/llama/test_neuron.py), bound against its v2.28.0 signatures."""

import types

import pytest
import torch

from tests.unit.trainium_trainer.llama.test_neuron import ParallelState, StandInNxDModel, hf_base, nxd  # noqa: F401 (fixtures)
from trainium_trainer.llama import neuron
from trainium_trainer.llama.hf_checkpoint import HFCheckpoint
from trainium_trainer.llama.model import build_config


def test_the_compile_trials_gathers_are_every_graph_the_writing_export_runs(nxd, hf_base, tmp_path):  # noqa: F811
    """On XLA-CPU, with an XLA concatenation standing in for the all-gather over the 2 TP ranks: the
    trial's pass (``write=False`` on every rank) compiles the gathers' graphs and writes nothing; the
    writing export after it compiles no graph of its own (its host copies are transfers)."""
    import torch_xla
    import torch_xla.debug.metrics as met
    from transformers import AutoModelForCausalLM

    folder, full = hf_base
    checkpoint = HFCheckpoint(folder.as_uri())
    config = build_config("tiny", 400, checkpoint)
    device = torch_xla.device()
    shards = {}
    for rank in (0, 1):
        ParallelState.tp_rank = rank
        shards[rank] = {n: t.to(device) for n, t in neuron.build_sharded(config, 0, checkpoint).state_dict().items()}
    torch_xla.sync()
    name_of = {id(t): n for n, t in shards[1].items()}

    def gather(tensor, dim):
        name = name_of[id(tensor)]
        return torch.cat([shards[0][name], shards[1][name]], dim=dim)

    def compiled() -> int:
        data = met.metric_data("CompileTime")
        return data[0] if data else 0

    model = StandInNxDModel(types.SimpleNamespace(state_dict=lambda: shards[1]))
    out = tmp_path / "out"
    start = compiled()
    assert neuron.save_full_model(model, config, None, write=False, gather=gather, sync=torch_xla.sync) == []
    trial = compiled() - start
    assert trial > 0 and not out.exists()
    files = neuron.save_full_model(model, config, out.as_uri(), write=True, max_shard_bytes=100_000,
                                   gather=gather, sync=torch_xla.sync)  # fmt: skip
    assert compiled() - start == trial, "the writing export compiled a graph the trial did not"
    assert len(files) > 2
    loaded = AutoModelForCausalLM.from_pretrained(out).state_dict()
    for name, tensor in full.items():
        torch.testing.assert_close(loaded[name], tensor, rtol=0, atol=0)
    with pytest.raises(ValueError, match="needs an output URI"):
        neuron.save_full_model(model, config, None, write=True, gather=gather, sync=torch_xla.sync)
