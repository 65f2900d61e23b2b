"""The neuronx-distributed calls, checked with the package absent: fake modules record what they get.

These paths only run on Trainium; here a stand-in ``neuronx_distributed`` (config, model/optimizer
wrappers, checkpoint save/load, parallel layers with a 2-way tensor-parallel state) captures the calls.
"""

import sys
import types

import pytest
import torch

from trainer.common.errors import BadInputError
from trainer.llama import neuron
from trainer.llama.model import new_model
from trainer.llama.presets import llama_config

TP, TP_RANK = 2, 1


class FakeColumn(torch.nn.Module):
    def __init__(self, input_size, output_size, bias=True, gather_output=True, dtype=torch.float32):
        super().__init__()
        assert not bias and not gather_output
        self.weight = torch.nn.Parameter(torch.empty(output_size // TP, input_size, dtype=dtype))


class FakeRow(torch.nn.Module):
    def __init__(self, input_size, output_size, bias=True, input_is_parallel=False, dtype=torch.float32):
        super().__init__()
        assert not bias and input_is_parallel
        self.weight = torch.nn.Parameter(torch.empty(output_size, input_size // TP, dtype=dtype))


@pytest.fixture
def nxd(monkeypatch):
    calls: dict[str, list] = {}

    def record(name, result=None):
        def fn(*args, **kwargs):
            calls.setdefault(name, []).append((args, kwargs))
            return result(*args, **kwargs) if callable(result) else result

        return fn

    root = types.ModuleType("neuronx_distributed")
    root.neuronx_distributed_config = record("config", {"nxd": "config"})
    root.initialize_parallel_model = record("model", lambda config, model_fn: model_fn())
    root.initialize_parallel_optimizer = record("optimizer", lambda config, cls, groups, **kw: cls(groups, **kw))
    root.save_checkpoint = record("save")
    root.load_checkpoint = record("load", {"step": 20})
    layers_pkg = types.ModuleType("neuronx_distributed.parallel_layers")
    state = types.ModuleType("neuronx_distributed.parallel_layers.parallel_state")
    state.get_tensor_model_parallel_size = lambda: TP
    state.get_tensor_model_parallel_rank = lambda: TP_RANK
    state.get_data_parallel_rank = lambda: 3
    state.get_data_parallel_size = lambda: 16
    layers = types.ModuleType("neuronx_distributed.parallel_layers.layers")
    layers.ColumnParallelLinear, layers.RowParallelLinear = FakeColumn, FakeRow
    layers_pkg.parallel_state, layers_pkg.layers = state, layers
    root.parallel_layers = layers_pkg
    for name, module in {
        "neuronx_distributed": root,
        "neuronx_distributed.parallel_layers": layers_pkg,
        "neuronx_distributed.parallel_layers.parallel_state": state,
        "neuronx_distributed.parallel_layers.layers": layers,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    return calls


def test_config_gets_tensor_parallel_zero1_clipping_and_activation_checkpointing(nxd):
    parallel = neuron.NeuronParallel(tensor_parallel_size=8, zero1=True, max_grad_norm=1.0,
                                     activation_checkpointing=True)  # fmt: skip
    assert neuron.make_config(parallel) == {"nxd": "config"}
    ((args, kwargs),) = nxd["config"]
    assert args == ()
    assert kwargs == {
        "tensor_parallel_size": 8,
        "optimizer_config": {"zero_one_enabled": True, "grad_clipping": True, "max_grad_norm": 1.0},
        "sequence_parallel": False,
        "activation_checkpoint_config": "full",
    }
    neuron.make_config(neuron.NeuronParallel(zero1=False, max_grad_norm=0.0))
    assert nxd["config"][1][1]["optimizer_config"] == {"zero_one_enabled": False, "grad_clipping": False,
                                                       "max_grad_norm": 0.0}  # fmt: skip
    assert nxd["config"][1][1]["activation_checkpoint_config"] is None


def test_layout_checks_reject_what_cannot_run():
    config = llama_config("tiny", 64)  # 4 heads
    neuron.NeuronParallel(tensor_parallel_size=2).check(config, world_size=32)
    with pytest.raises(BadInputError, match="attention heads"):
        neuron.NeuronParallel(tensor_parallel_size=8).check(config, world_size=32)
    with pytest.raises(BadInputError, match="divide the 6 ranks"):
        neuron.NeuronParallel(tensor_parallel_size=4).check(config, world_size=6)
    with pytest.raises(BadInputError, match="sequence parallel"):
        neuron.NeuronParallel(tensor_parallel_size=2, sequence_parallel=True).check(config, world_size=2)


def test_parallel_model_holds_this_ranks_shard_of_the_base_weights(nxd):
    config = llama_config("tiny", 64)
    full = {k: v.clone() for k, v in new_model(config, seed=7).state_dict().items()}
    model = neuron.parallel_model({"nxd": "config"}, lambda: new_model(config, seed=0), full)
    ((args, _),) = nxd["model"]
    assert args[0] == {"nxd": "config"} and callable(args[1])
    attn, mlp = model.model.layers[1].self_attn, model.model.layers[1].mlp
    assert isinstance(attn.q_proj, FakeColumn) and isinstance(attn.o_proj, FakeRow)
    assert isinstance(mlp.up_proj, FakeColumn) and isinstance(mlp.down_proj, FakeRow)
    q = full["model.layers.1.self_attn.q_proj.weight"]
    torch.testing.assert_close(attn.q_proj.weight.data, q.chunk(TP, dim=0)[TP_RANK])
    down = full["model.layers.1.mlp.down_proj.weight"]
    torch.testing.assert_close(mlp.down_proj.weight.data, down.chunk(TP, dim=1)[TP_RANK])
    torch.testing.assert_close(model.model.embed_tokens.weight.data, full["model.embed_tokens.weight"])
    assert neuron.data_parallel_layout() == (3, 16)


def test_optimizer_wrapper_gets_adamw_with_decay_groups(nxd):
    model = new_model(llama_config("tiny", 64), seed=0)
    optimizer = neuron.parallel_optimizer({"nxd": "config"}, model, lr=3e-4, weight_decay=0.1)
    ((args, kwargs),) = nxd["optimizer"]
    assert args[0] == {"nxd": "config"} and args[1] is torch.optim.AdamW
    decay, no_decay = args[2]
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim >= 2 for p in decay["params"]) and all(p.ndim == 1 for p in no_decay["params"])
    assert kwargs == {"lr": 3e-4, "betas": (0.9, 0.95)}
    assert isinstance(optimizer, torch.optim.AdamW)


def test_checkpoint_save_and_load_use_the_step_tag(nxd):
    model, optimizer, scheduler = object(), object(), object()
    user = {"step": 20, "data_position": {"epoch": 2, "batch": 4}}
    tag = neuron.save("s3://bucket/ckpt", 20, model, optimizer, scheduler, user, keep_last=3)
    assert tag == "step_00000020"
    ((args, kwargs),) = nxd["save"]
    assert args == ("s3://bucket/ckpt",)
    assert kwargs == {"tag": "step_00000020", "model": model, "optimizer": optimizer, "scheduler": scheduler,
                      "user_content": user, "num_kept_ckpts": 3, "use_xser": True}  # fmt: skip
    assert neuron.load("s3://bucket/ckpt", tag, model, optimizer, scheduler) == {"step": 20}
    ((args, kwargs),) = nxd["load"]
    assert args == ("s3://bucket/ckpt",)
    assert kwargs == {"tag": "step_00000020", "model": model, "optimizer": optimizer, "scheduler": scheduler}
