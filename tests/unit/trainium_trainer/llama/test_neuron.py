"""The neuronx-distributed calls, checked with the package absent: stand-in modules record what they get.

These paths only run on Trainium; here a stand-in ``neuronx_distributed`` (config, model/optimizer
wrappers, checkpoint save/load, parallel layers with a 2-way tensor-parallel state) captures the calls.
Every call is first bound against the real signature (tests/unit/trainium_trainer/llama/nxd_signatures.py,
transcribed from the neuronx-distributed source), so a misspelt keyword or a missing argument fails here as it
would there.
"""

import sys
import types
from pathlib import Path

import pytest
import torch

from tests.hf_fixtures import ReadSpy, save_tiny_llama
from tests.unit.trainium_trainer.llama import nxd_signatures as real
from trainium_trainer.common.errors import BadInputError
from trainium_trainer.llama import neuron
from trainium_trainer.llama.hf_checkpoint import HFCheckpoint
from trainium_trainer.llama.model import build_config, new_model
from trainium_trainer.llama.presets import PRESETS, llama_config

TP = 2
#: (ranks per node, host GiB) of each instance type, from the instance catalog (docs/llama.md's table).
INSTANCES = {"trn1.2xlarge": (2, 32), "trn1.32xlarge": (32, 512), "trn2.48xlarge": (64, 2048)}


class ParallelState:
    tp_rank = 1


def _parallel_linear(stub, partition_dim: int):
    class StandIn(torch.nn.Module):
        """Holds this rank's shard with the attributes NxD sets (``tensor_model_parallel``, ...)."""

        def __init__(self, *args, **kwargs):
            super().__init__()
            self.arguments = real.bind(stub, *args, **kwargs)
            a = self.arguments
            assert not a["bias"]
            shape = [a["output_size"], a["input_size"]]
            shape[partition_dim] //= TP
            self.weight = torch.nn.Parameter(torch.empty(*shape, dtype=a["dtype"], device=a["device"]))
            self.weight.tensor_model_parallel = True
            self.weight.partition_dim = partition_dim

        def forward(self, x):  # only used with TP ranks that each see the whole (tp=1 views)
            return torch.nn.functional.linear(x, self.weight)

    return StandIn


FakeColumn = _parallel_linear(real.column_parallel_linear, 0)
FakeRow = _parallel_linear(real.row_parallel_linear, 1)


class StandInNxDModel:
    """What ``initialize_parallel_model`` returns, as neuronx-distributed v2.28.0's ``NxDModel``
    (trainium_trainer/model.py) behaves without pipeline parallelism: ``state_dict()`` and every attribute it does
    not define itself are the wrapped module's; it has ``local_modules()`` (plural), no ``local_module``."""

    def __init__(self, module):
        self.module = module

    def local_modules(self):
        return [self.module]

    def original_module(self):
        return self.module

    def state_dict(self, *args, **kwargs):
        return self.module.state_dict(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.module, name)


@pytest.fixture
def nxd(monkeypatch):
    calls: dict[str, list[dict]] = {}

    def standin(name, stub, result=None):
        def fn(*args, **kwargs):
            arguments = real.bind(stub, *args, **kwargs)  # TypeError on a call the real API refuses
            calls.setdefault(name, []).append(arguments)
            return result(arguments) if callable(result) else result

        return fn

    root = types.ModuleType("neuronx_distributed")
    root.neuronx_distributed_config = standin("config", real.neuronx_distributed_config, {"nxd": "config"})
    root.initialize_parallel_model = standin(
        "model", real.initialize_parallel_model, lambda a: StandInNxDModel(a["model_fn"]())
    )
    root.initialize_parallel_optimizer = standin(
        "optimizer",
        real.initialize_parallel_optimizer,
        lambda a: a["optimizer_class"](a["parameters"], **a["defaults"]),
    )
    root.save_checkpoint = standin("save", real.save_checkpoint)
    root.load_checkpoint = standin("load", real.load_checkpoint, {"step": 20})
    layers_pkg = types.ModuleType("neuronx_distributed.parallel_layers")
    state = types.ModuleType("neuronx_distributed.parallel_layers.parallel_state")
    state.get_tensor_model_parallel_size = standin("tp_size", real.get_tensor_model_parallel_size, TP)
    state.get_tensor_model_parallel_rank = standin(
        "tp_rank", real.get_tensor_model_parallel_rank, lambda a: ParallelState.tp_rank
    )
    state.get_data_parallel_rank = standin("dp_rank", real.get_data_parallel_rank, 3)
    state.get_data_parallel_size = standin("dp_size", real.get_data_parallel_size, 16)
    state.get_tensor_model_parallel_group = standin("tp_group", real.get_tensor_model_parallel_group, [[0, 1]])
    layers = types.ModuleType("neuronx_distributed.parallel_layers.layers")
    layers.ColumnParallelLinear, layers.RowParallelLinear = FakeColumn, FakeRow
    layers_pkg.parallel_state, layers_pkg.layers = state, layers
    utils = types.ModuleType("neuronx_distributed.utils")
    model_utils = types.ModuleType("neuronx_distributed.utils.model_utils")
    model_utils.get_platform_lnc = standin("lnc", real.get_platform_lnc, 2)
    root.parallel_layers, root.utils, utils.model_utils = layers_pkg, utils, model_utils
    for name, module in {
        "neuronx_distributed": root,
        "neuronx_distributed.parallel_layers": layers_pkg,
        "neuronx_distributed.parallel_layers.parallel_state": state,
        "neuronx_distributed.parallel_layers.layers": layers,
        "neuronx_distributed.utils": utils,
        "neuronx_distributed.utils.model_utils": model_utils,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    ParallelState.tp_rank = 1
    return calls


@pytest.fixture(scope="module")
def hf_base(tmp_path_factory) -> tuple[Path, dict[str, torch.Tensor]]:
    folder = tmp_path_factory.mktemp("nxd-base")
    return folder, save_tiny_llama(folder)


def test_stand_ins_refuse_what_the_real_api_refuses(nxd):
    import neuronx_distributed as nxd_module

    with pytest.raises(TypeError, match="unexpected keyword argument 'lnc'"):
        nxd_module.neuronx_distributed_config(tensor_parallel_size=8, lnc=2)
    with pytest.raises(TypeError, match="missing a required argument: 'tag'"):
        nxd_module.save_checkpoint("s3://b/ckpt", model=None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'input_is_parallel'"):
        FakeColumn(4, 4, bias=False, input_is_parallel=True)


def test_config_gets_tensor_parallel_zero1_clipping_activation_checkpointing_and_lnc(nxd):
    parallel = neuron.NeuronParallel(tensor_parallel_size=8, zero1=True, max_grad_norm=1.0,
                                     activation_checkpointing=True, lnc_size=2)  # fmt: skip
    assert neuron.make_config(parallel) == {"nxd": "config"}
    (arguments,) = nxd["config"]
    assert arguments["tensor_parallel_size"] == 8 and arguments["lnc_size"] == 2
    assert arguments["optimizer_config"] == {"zero_one_enabled": True, "grad_clipping": True, "max_grad_norm": 1.0}
    assert arguments["sequence_parallel"] is False and arguments["activation_checkpoint_config"] == "full"
    neuron.make_config(neuron.NeuronParallel(zero1=False, max_grad_norm=0.0))
    assert nxd["config"][1]["optimizer_config"] == {"zero_one_enabled": False, "grad_clipping": False,
                                                    "max_grad_norm": 0.0}  # fmt: skip
    assert nxd["config"][1]["activation_checkpoint_config"] is None and nxd["config"][1]["lnc_size"] == 1


def test_lnc_size_comes_from_the_runtime_variable_else_the_platform(nxd, monkeypatch):
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    assert neuron.platform_lnc_size() == 1
    monkeypatch.delenv("NEURON_LOGICAL_NC_CONFIG")
    assert neuron.platform_lnc_size() == 2  # what NxD's get_platform_lnc reports (trn2 in the stand-in)
    assert len(nxd["lnc"]) == 1


def test_layout_checks_reject_what_cannot_run():
    config = llama_config("tiny", 64)  # 4 heads
    neuron.NeuronParallel(tensor_parallel_size=2).check(config, world_size=32)
    with pytest.raises(BadInputError, match="attention heads"):
        neuron.NeuronParallel(tensor_parallel_size=8).check(config, world_size=32)
    with pytest.raises(BadInputError, match="divide the 6 ranks"):
        neuron.NeuronParallel(tensor_parallel_size=4).check(config, world_size=6)
    with pytest.raises(BadInputError, match="sequence parallel"):
        neuron.NeuronParallel(tensor_parallel_size=2, sequence_parallel=True).check(config, world_size=2)


def unique_param_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


@pytest.mark.model
def test_each_rank_allocates_and_reads_only_its_shards_of_the_base_weights(nxd, hf_base, monkeypatch):
    folder, full = hf_base
    checkpoint = HFCheckpoint(folder.as_uri())
    config = build_config("tiny", 400, checkpoint)
    spy = ReadSpy().install(monkeypatch)
    model = neuron.parallel_model({"nxd": "config"}, config, seed=0, checkpoint=checkpoint)

    (arguments,) = nxd["model"]
    assert arguments["nxd_config"] == {"nxd": "config"} and arguments["include_buffers"] is False
    assert not [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    # the allocation rule: the projections' 1/TP share + the replicated embedding, LM head and norms
    assert unique_param_bytes(model) == neuron.model_bytes(config, TP) < neuron.model_bytes(config, 1)
    assert unique_param_bytes(new_model(config, 0)) == neuron.model_bytes(config, 1)

    attn, mlp = model.model.layers[1].self_attn, model.model.layers[1].mlp
    assert isinstance(model, StandInNxDModel)
    assert isinstance(attn.q_proj, FakeColumn) and isinstance(attn.o_proj, FakeRow)
    assert attn.q_proj.arguments["device"] == torch.device("meta") and attn.q_proj.weight.tensor_model_parallel
    torch.testing.assert_close(attn.q_proj.weight.data, full["model.layers.1.self_attn.q_proj.weight"].chunk(TP, 0)[1])
    torch.testing.assert_close(mlp.down_proj.weight.data, full["model.layers.1.mlp.down_proj.weight"].chunk(TP, 1)[1])
    torch.testing.assert_close(model.model.embed_tokens.weight.data, full["model.embed_tokens.weight"])
    assert set(spy.tensors.values()) == {1} and set(spy.tensors) == set(checkpoint.weight_map)
    q_rows = full["model.layers.1.self_attn.q_proj.weight"].shape[0]
    assert spy.slices["model.layers.1.self_attn.q_proj.weight"] == [(slice(q_rows // 2, q_rows), slice(None))]
    assert "model.embed_tokens.weight" not in spy.slices  # replicated: read whole, once
    torch.testing.assert_close(model.model.rotary_emb.inv_freq, new_model(config, 0).model.rotary_emb.inv_freq)
    assert neuron.data_parallel_layout() == (3, 16)


@pytest.mark.model
def test_fresh_sharded_init_agrees_across_ranks_where_weights_are_replicated(nxd):
    config = llama_config("tiny", 64)
    ranks = []
    for rank in (0, 1):
        ParallelState.tp_rank = rank
        ranks.append(neuron.build_sharded(config, seed=5, checkpoint=None))
    a, b = ranks
    torch.testing.assert_close(a.model.embed_tokens.weight, b.model.embed_tokens.weight, rtol=0, atol=0)
    torch.testing.assert_close(a.lm_head.weight, b.lm_head.weight, rtol=0, atol=0)
    assert not torch.equal(a.model.layers[0].mlp.up_proj.weight, b.model.layers[0].mlp.up_proj.weight)
    std = a.model.layers[0].mlp.up_proj.weight.std().item()
    assert abs(std - config.initializer_range) < 0.2 * config.initializer_range
    assert torch.equal(a.model.norm.weight, torch.ones_like(a.model.norm.weight))


@pytest.mark.model
def test_output_is_gathered_tensor_by_tensor_and_written_by_one_rank(nxd, hf_base, tmp_path):
    from transformers import AutoModelForCausalLM

    folder, full = hf_base
    checkpoint = HFCheckpoint(folder.as_uri())
    config = build_config("tiny", 400, checkpoint)
    shards = {}
    for rank in (0, 1):
        ParallelState.tp_rank = rank
        shards[rank] = neuron.build_sharded(config, 0, checkpoint).state_dict()
    by_storage = {t.data_ptr(): n for n, t in shards[1].items()}
    gathered, synced = [], []

    def gather(tensor, dim):  # what an all-gather over the 2 TP ranks returns
        name = by_storage[tensor.data_ptr()]
        gathered.append(name)
        return torch.cat([shards[0][name], shards[1][name]], dim=dim)

    model = StandInNxDModel(types.SimpleNamespace(state_dict=lambda: shards[1]))
    out = tmp_path / "out"
    assert neuron.save_full_model(model, config, out.as_uri(), write=False, gather=gather,
                                  sync=lambda: synced.append(1)) == []  # fmt: skip
    assert not out.exists() and len(synced) == len(gathered) == 7 * config.num_hidden_layers  # joins every gather
    files = neuron.save_full_model(model, config, out.as_uri(), write=True, max_shard_bytes=100_000, gather=gather,
                                   sync=lambda: None)  # fmt: skip
    assert len(files) > 2 and (out / "model.safetensors.index.json").exists()
    loaded = AutoModelForCausalLM.from_pretrained(out).state_dict()
    for name, tensor in full.items():
        torch.testing.assert_close(loaded[name], tensor, rtol=0, atol=0)


def test_host_memory_rule_refuses_layouts_that_do_not_fit_and_the_docs_table_follows_it():
    big = llama_config("llama2-7b", 32000)
    with pytest.raises(BadInputError, match="32 ranks x 25.1 GiB of weights each exceed this host's 512 GiB"):
        neuron.check_host_memory(big, tp=1, local_ranks=32, host_bytes=512 * 2**30)
    assert neuron.check_host_memory(big, tp=8, local_ranks=32, host_bytes=512 * 2**30) < 4.5 * 2**30
    docs = (Path(__file__).resolve().parents[4] / "docs" / "llama.md").read_text()
    for row in neuron.memory_table(PRESETS, INSTANCES):
        assert row in docs, row


@pytest.mark.model
def test_optimizer_wrapper_gets_adamw_with_decay_groups(nxd):
    model = new_model(llama_config("tiny", 64), seed=0)
    optimizer = neuron.parallel_optimizer({"nxd": "config"}, model, lr=3e-4, weight_decay=0.1)
    (arguments,) = nxd["optimizer"]
    assert arguments["nxd_config"] == {"nxd": "config"} and arguments["optimizer_class"] is torch.optim.AdamW
    decay, no_decay = arguments["parameters"]
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim >= 2 for p in decay["params"]) and all(p.ndim == 1 for p in no_decay["params"])
    assert arguments["defaults"] == {"lr": 3e-4, "betas": (0.9, 0.95)}
    assert isinstance(optimizer, torch.optim.AdamW)


def test_checkpoint_save_and_load_use_the_step_tag(nxd):
    model, optimizer, scheduler = object(), object(), object()
    user = {"step": 20, "data_position": {"epoch": 2, "batch": 4}}
    tag = neuron.save("s3://bucket/ckpt", 20, model, optimizer, scheduler, user, keep_last=3)
    assert tag == "step_00000020"
    (arguments,) = nxd["save"]
    assert arguments["checkpoint_dir_str"] == "s3://bucket/ckpt" and arguments["tag"] == "step_00000020"
    assert arguments["model"] is model and arguments["optimizer"] is optimizer and arguments["scheduler"] is scheduler
    assert arguments["user_content"] == user and arguments["num_kept_ckpts"] == 3 and arguments["use_xser"] is True
    assert neuron.load("s3://bucket/ckpt", tag, model, optimizer, scheduler) == {"step": 20}
    (arguments,) = nxd["load"]
    assert arguments["path"] == "s3://bucket/ckpt" and arguments["tag"] == "step_00000020"
    assert arguments["model"] is model and arguments["strict"] is True
