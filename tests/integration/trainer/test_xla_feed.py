"""The device feed on real torch-xla (PJRT_DEVICE=CPU): batches reach the XLA device in order, the background
loader's threads stop, and training through the feed runs one graph per step and matches eager torch.

Integration, not unit: each test starts torch-xla (and the training ones a fresh interpreter)."""

import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from trainium_trainer.common import feed as feeds
from trainium_trainer.common.device import Runtime
from trainium_trainer.common.feed import device_feed, gather_batches


def data(n: int = 40) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(n * 6, dtype=torch.float32).view(n, 2, 3), torch.arange(n) * 10


def xla_runtime() -> Runtime:
    import torch_xla

    return Runtime("xla", torch_xla.device())


@pytest.mark.parametrize("kind", ["sync", "background"])
def test_xla_feed_moves_every_batch_to_the_device_in_order(monkeypatch, kind):
    monkeypatch.setenv("TRAINIUM_DEVICE_FEED", kind)
    monkeypatch.setattr(feeds, "SYNC_CHUNK", 4)  # 10 batches: two full chunks and a partial one
    features, labels = data()
    batches = gather_batches((features, labels), np.random.default_rng(1).permutation(40).reshape(10, 4))
    with device_feed(batches, xla_runtime()) as feed:
        seen = [(x.device.type, x.cpu(), y.cpu()) for x, y in feed]
    assert [s[0] for s in seen] == ["xla"] * 10
    assert all(torch.equal(s[1], b[0]) and torch.equal(s[2], b[1]) for s, b in zip(seen, batches, strict=True))


def test_background_feed_stops_its_threads_when_left_early(monkeypatch):
    monkeypatch.setenv("TRAINIUM_DEVICE_FEED", "background")
    threads = threading.active_count()
    features, labels = data(1000)  # more batches than the loader's queues hold: its threads are still busy
    batches = gather_batches((features, labels), np.arange(1000).reshape(250, 4))
    with device_feed(batches, xla_runtime()) as feed:
        next(feed)
        assert threading.active_count() > threads  # the loader's reader and transfer threads
    assert threading.active_count() == threads


def test_sync_feed_starts_no_thread(monkeypatch):
    monkeypatch.setenv("TRAINIUM_DEVICE_FEED", "sync")
    threads = threading.active_count()
    features, labels = data(1000)
    batches = gather_batches((features, labels), np.arange(1000).reshape(250, 4))
    with device_feed(batches, xla_runtime()) as feed:
        next(feed)
        next(feed)
        assert threading.active_count() == threads


def sgd_losses(batches: list, runtime: Runtime) -> tuple[list[float], list[int]]:
    """Two epochs of a tiny SGD loop over the feed; the losses and the graphs each epoch compiled and ran."""
    import torch_xla.debug.metrics as met

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 5), torch.nn.LogSoftmax(-1)).to(runtime.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, graphs = [], []
    for _ in range(2):
        compiled, ran = runtime.compilations(), met.counter_value("ExecuteComputation") or 0
        epoch_losses = []
        with device_feed(batches, runtime) as feed:
            for x, y in feed:
                optimizer.zero_grad()
                loss = F.nll_loss(model(x), y)
                loss.backward()
                optimizer.step()
                epoch_losses.append(loss.detach())
        losses += [float(v) for v in runtime.to_cpu(epoch_losses)]
        graphs.append((runtime.compilations() - compiled, (met.counter_value("ExecuteComputation") or 0) - ran))
    return losses, graphs


def xla_run(kind: str) -> tuple[list[float], list]:
    """The XLA half, in a fresh interpreter: torch-xla must register its device before autograd's engine
    starts, which an earlier eager test in the same process would already have done."""
    import os

    os.environ["TRAINIUM_DEVICE_FEED"] = kind
    feeds.SYNC_CHUNK = 3
    features, labels = data()
    features, labels = features / 240.0, labels // 10 % 5
    batches = gather_batches((features, labels), np.random.default_rng(2).permutation(40).reshape(10, 4))
    return sgd_losses(batches, xla_runtime())


@pytest.mark.parametrize("kind", ["sync", "background"])
def test_xla_training_through_the_feed_runs_one_graph_per_step_and_matches_eager(kind):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        xla_losses, graphs = pool.submit(xla_run, kind).result(timeout=600)
    features, labels = data()
    features, labels = features / 240.0, labels // 10 % 5
    batches = gather_batches((features, labels), np.random.default_rng(2).permutation(40).reshape(10, 4))
    # The feed cuts exactly one graph per step (the last when it runs out); warm, it compiles nothing new.
    assert tuple(graphs[1]) == (0, 10)
    assert graphs[0][1] == 10 and graphs[0][0] <= 2  # the first step's graph, and the one after the first update
    assert xla_losses == pytest.approx(eager_reference(batches), rel=1e-5, abs=1e-6)


def eager_reference(batches: list) -> list[float]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 5), torch.nn.LogSoftmax(-1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(2):
        for x, y in batches:
            optimizer.zero_grad()
            loss = F.nll_loss(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    return losses
