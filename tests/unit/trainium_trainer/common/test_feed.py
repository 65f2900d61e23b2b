"""Batches are gathered once per epoch into contiguous views and reach the device in order, one graph per step."""

import threading

import numpy as np
import pytest
import torch

from trainium_trainer.common import feed as feeds
from trainium_trainer.common.device import Runtime
from trainium_trainer.common.feed import EpochBatches, device_feed, feed_kind, gather_batches, gather_buffers


def data(n: int = 40) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(n * 6, dtype=torch.float32).view(n, 2, 3), torch.arange(n) * 10


def test_each_step_gets_its_samples_in_order_as_contiguous_views_of_one_gather():
    features, labels = data()
    order = np.random.default_rng(0).permutation(40)[:36].reshape(9, 4)
    batches = gather_batches((features, labels), order)
    assert len(batches) == 9
    storage = batches[0][0].untyped_storage().data_ptr()
    for (x, y), indices in zip(batches, order, strict=True):
        assert torch.equal(x, features[torch.from_numpy(indices)])
        assert torch.equal(y, labels[torch.from_numpy(indices)])
        assert x.is_contiguous() and y.is_contiguous()
        assert x.untyped_storage().data_ptr() == storage  # views of the one gathered tensor, no per-step copy


def test_eager_feed_yields_the_host_batches_themselves():
    features, labels = data()
    batches = gather_batches((features, labels), np.arange(40).reshape(10, 4))
    with device_feed(batches, Runtime("eager", torch.device("cpu"))) as feed:
        assert list(feed) == batches


def test_the_feed_is_the_background_loader_on_neuron_and_synchronous_on_xla_cpu(monkeypatch):
    monkeypatch.delenv("TRAINIUM_DEVICE_FEED", raising=False)
    assert feed_kind(Runtime("neuron", torch.device("cpu"))) == "background"
    assert feed_kind(Runtime("xla", torch.device("cpu"))) == "sync"
    monkeypatch.setenv("TRAINIUM_DEVICE_FEED", "background")
    assert feed_kind(Runtime("xla", torch.device("cpu"))) == "background"
    monkeypatch.setenv("TRAINIUM_DEVICE_FEED", "threads")
    with pytest.raises(ValueError, match="TRAINIUM_DEVICE_FEED='threads'; allowed: background, sync"):
        feed_kind(Runtime("xla", torch.device("cpu")))


def test_gathers_into_reused_buffers_give_each_order_its_samples():
    features, labels = data()
    buffers = gather_buffers((features, labels), 36)
    for seed in (0, 1):
        order = np.random.default_rng(seed).permutation(40)[:32].reshape(8, 4)
        batches = gather_batches((features, labels), order, out=buffers)
        assert [(x.tolist(), y.tolist()) for x, y in batches] == [
            (x.tolist(), y.tolist()) for x, y in gather_batches((features, labels), order)
        ]
        assert batches[0][0].untyped_storage().data_ptr() == buffers[0].untyped_storage().data_ptr()
    with pytest.raises(ValueError, match="fewer than the 40 samples"):
        gather_batches((features, labels), np.arange(40).reshape(10, 4), out=buffers)


def epoch_order(epoch: int) -> np.ndarray:
    return np.random.default_rng(epoch).permutation(40)[:32].reshape(8, 4)


def test_epoch_batches_give_each_epoch_its_own_order_in_two_alternating_buffer_sets():
    features, labels = data()
    seen = []
    with EpochBatches((features, labels), epoch_order, range(2, 6)) as shuffled:
        for epoch, batches in shuffled:
            expected = gather_batches((features, labels), epoch_order(epoch))
            assert [(x.tolist(), y.tolist()) for x, y in batches] == [(x.tolist(), y.tolist()) for x, y in expected]
            seen.append((epoch, batches[0][0].untyped_storage().data_ptr()))
    assert [epoch for epoch, _ in seen] == [2, 3, 4, 5]
    storages = [ptr for _, ptr in seen]
    assert storages[0] == storages[2] != storages[1] == storages[3]  # memory touched once, then refilled


def test_the_next_epoch_is_gathered_while_this_one_trains_and_never_into_its_buffers(monkeypatch):
    features, labels = data()
    threads: dict[int, str] = {}
    done = {epoch: threading.Event() for epoch in range(3)}
    real_gather = feeds.gather_batches

    def gather(tensors, order, out=None):
        batches = real_gather(tensors, order, out=out)
        epoch = next(e for e in range(3) if np.array_equal(order, epoch_order(e)))
        threads[epoch] = threading.current_thread().name
        done[epoch].set()
        return batches

    monkeypatch.setattr(feeds, "gather_batches", gather)
    with EpochBatches((features, labels), epoch_order, range(3)) as shuffled:
        for epoch, batches in shuffled:
            expected = [x for x, _ in real_gather((features, labels), epoch_order(epoch))]
            if epoch + 1 < 3:
                # the next epoch's gather finishes while this epoch is still in its loop...
                assert done[epoch + 1].wait(timeout=30)
            # ...into other buffers: this epoch's batches are still its own
            assert all(torch.equal(x, e) for (x, _), e in zip(batches, expected, strict=True))
    assert threads[0] == threading.current_thread().name  # the first epoch is set-up, on the caller's thread
    assert threads[1].startswith("epoch-gather") and threads[2].startswith("epoch-gather")


def test_leaving_early_stops_the_background_gather():
    features, labels = data()
    shuffled = EpochBatches((features, labels), epoch_order, range(100))
    with shuffled:
        for epoch, _ in shuffled:
            if epoch == 1:
                break
    assert shuffled._pool is None
    assert not any(t.name.startswith("epoch-gather") for t in threading.enumerate())
