"""The (dp, tp) layout: which batch a rank reads, and the layouts the model cannot be split into."""

from __future__ import annotations

import pytest

from trainium_trainer.common.errors import BadInputError
from trainium_trainer.llama.presets import llama_config
from trainium_trainer.native.parallel import Layout, check_layout


def test_tensor_parallel_ranks_of_one_data_rank_read_the_same_batch():
    ranks = [Layout(rank, 8, 2) for rank in range(8)]
    assert [r.data_rank for r in ranks] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert {r.data_parallel_size for r in ranks} == {4} and [r.is_main for r in ranks].count(True) == 1


def test_layouts_the_model_cannot_be_split_into_are_bad_input():
    config = llama_config("tiny", 512)  # 4 heads, 4 kv heads, intermediate 176
    check_layout(4, 2, config)
    check_layout(4, 4, config)
    with pytest.raises(BadInputError, match="does not divide the 4 ranks"):
        check_layout(4, 3, config)
    with pytest.raises(BadInputError, match="the model's 4 attention heads"):
        check_layout(8, 8, config)
    with pytest.raises(BadInputError, match="the model's 2 key/value heads"):
        check_layout(4, 4, llama_config("tiny", 512, num_key_value_heads=2))
