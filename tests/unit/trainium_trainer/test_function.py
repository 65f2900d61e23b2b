"""The in-container runner of a ``@task.trainium`` function leaves a process group cleanly."""

from __future__ import annotations

import socket

import pytest
import torch.distributed as dist

from trainium_trainer.function import close_process_group


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_group_the_function_opened_is_destroyed_before_the_rank_exits():
    store = dist.TCPStore("127.0.0.1", free_port(), world_size=1, is_master=True)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        close_process_group()
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_a_function_without_a_group_needs_no_teardown():
    assert not dist.is_initialized()
    close_process_group()
    assert not dist.is_initialized()


@pytest.fixture(autouse=True)
def no_group_left_behind():
    yield
    assert not dist.is_initialized()
