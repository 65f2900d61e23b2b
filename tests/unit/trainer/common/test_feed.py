"""Batches are gathered once per epoch into contiguous views and reach the device through torch-xla's loader."""

import threading

import numpy as np
import torch

from trainer.common.device import Runtime
from trainer.common.feed import device_feed, gather_batches


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


def test_xla_feed_moves_every_batch_to_the_device_and_stops_its_threads_when_left_early():
    import torch_xla

    runtime = Runtime("xla", torch_xla.device())
    features, labels = data()
    batches = gather_batches((features, labels), np.arange(40).reshape(10, 4))
    with device_feed(batches, runtime) as feed:
        seen = [(x.device.type, x.cpu(), y.cpu()) for x, y in feed]
    assert [s[0] for s in seen] == ["xla"] * 10
    assert all(torch.equal(s[1], b[0]) and torch.equal(s[2], b[1]) for s, b in zip(seen, batches, strict=True))

    threads = threading.active_count()
    features, labels = data(1000)  # more batches than the loader's queues hold: its threads are still busy
    batches = gather_batches((features, labels), np.arange(1000).reshape(250, 4))
    with device_feed(batches, runtime) as feed:
        next(feed)
        assert threading.active_count() > threads  # the loader's reader and transfer threads
    assert threading.active_count() == threads
