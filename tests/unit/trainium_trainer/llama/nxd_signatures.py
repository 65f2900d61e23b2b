"""The signatures of the neuronx-distributed APIs the trainer calls, transcribed (parameters, order and
defaults; bodies left out) from the neuronx-distributed source, so stand-ins can refuse a wrong call.

Source: github.com/aws-neuron/neuronx-distributed at tag ``v2.28.0``, commit
22cadad34418fb8b5939bd8cdfc7a376eede9981 (``__version__ = "0.17.0"``), the source of the image's
neuronx-distributed 0.17.26814+4b18de63 (Neuron SDK 2.28.0, the deep-learning-containers' 2.28.0
``NEURONX_DISTRIBUTED_VERSION``). Every signature here reads the same at commit fbac349b ("Release 2.29").
"""

# ruff: noqa: ARG001, FBT001, FBT002, PLR0913  (transcribed signatures, not code)

from __future__ import annotations

import inspect
from typing import Any


# src/neuronx_distributed/trainer/trainer.py
def neuronx_distributed_config(
    tensor_parallel_size=1,
    pipeline_parallel_size=1,
    expert_parallel_size=1,
    context_parallel_size=1,
    pipeline_config=None,
    optimizer_config=None,
    activation_checkpoint_config=None,
    pad_model=False,
    sequence_parallel=False,
    model_init_config=None,
    lora_config=None,
    mixed_precision_config=None,
    sequential_move_factor=11,
    lnc_size=1,
): ...


# src/neuronx_distributed/trainer/trainer.py
def initialize_parallel_model(nxd_config, model_fn, include_buffers: bool = False, *model_args, **model_kwargs): ...


# src/neuronx_distributed/trainer/trainer.py
def initialize_parallel_optimizer(nxd_config, optimizer_class, parameters, **defaults): ...


# src/neuronx_distributed/trainer/checkpoint.py
def save_checkpoint(
    checkpoint_dir_str: str,
    tag: str,
    model: Any = None,
    optimizer: Any = None,
    scheduler=None,
    user_content=None,
    num_workers=8,
    use_xser=False,
    num_kept_ckpts=None,
    async_save=False,
    zero1_optimizer=False,
    use_zero1_dcp=False,
    avoid_saving_lower_precision_weights=False,
) -> None: ...


# src/neuronx_distributed/trainer/checkpoint.py
def load_checkpoint(
    path: str,
    tag: str | None = None,
    model: Any = None,
    optimizer: Any = None,
    scheduler: Any = None,
    num_workers: int = 8,
    strict: bool = True,
    use_zero1_dcp: bool = False,
) -> Any: ...


# src/neuronx_distributed/parallel_layers/parallel_state.py
def get_tensor_model_parallel_size() -> int: ...
def get_tensor_model_parallel_rank() -> int: ...
def get_data_parallel_size() -> int: ...
def get_data_parallel_rank() -> int: ...
def get_tensor_model_parallel_group(as_list: bool = False): ...


# src/neuronx_distributed/utils/model_utils.py
def get_platform_lnc(): ...


# src/neuronx_distributed/parallel_layers/layers.py, ColumnParallelLinear.__init__
def column_parallel_linear(
    input_size: int,
    output_size: int,
    bias: bool = True,
    gather_output: bool = True,
    dtype: Any = "torch.float32",
    device: Any = None,
    stride: int = 1,
    init_method: Any = None,
    sequence_parallel_enabled: bool = False,
    sequence_dimension: int | None = None,
    keep_master_weight: bool = False,
    skip_bias_add: bool = False,
    pad: bool = False,
    pad_alignment_size_per_rank: int = 1,
    keep_padded_output: bool = False,
    tensor_model_parallel_group: Any = None,
    reduce_dtype: Any = "torch.float32",
    rank_ordering: list | None = None,
): ...


# src/neuronx_distributed/parallel_layers/layers.py, RowParallelLinear.__init__
def row_parallel_linear(
    input_size: int,
    output_size: int,
    bias: bool = True,
    input_is_parallel: bool = False,
    dtype: Any = "torch.float32",
    device: Any = None,
    stride: int = 1,
    init_method: Any = None,
    sequence_parallel_enabled: bool = False,
    sequence_dimension: int | None = None,
    keep_master_weight: bool = False,
    skip_bias_add: bool = False,
    pad: bool = False,
    reduce_output: bool = True,
    tensor_model_parallel_group: Any = None,
    reduce_dtype: Any = "torch.float32",
    tile_cc: bool = False,
    rank_ordering: list | None = None,
): ...


def bind(stub, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Every argument by name, defaults applied; ``TypeError`` for a call the real function refuses."""
    bound = inspect.signature(stub).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)
