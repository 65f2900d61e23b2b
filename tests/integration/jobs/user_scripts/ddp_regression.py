"""A torchrun script as a user writes it for a laptop: its own argparse, torch.distributed, relative paths.

It knows nothing of the provider: it checkpoints into ``./checkpoints`` every epoch, resumes from the newest one,
and rank 0 writes ``./outputs/model.pt`` and ``./outputs/summary.json``. ``PAUSE_AFTER_EPOCH`` (a test hook,
not part of the script's interface) makes rank 0 wait after that epoch's checkpoint until it is killed.
"""

import argparse
import json
import os
import signal
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    checkpoints = Path("checkpoints")
    start = 0
    saved = sorted(checkpoints.glob("epoch-*.pt"), key=lambda p: int(p.stem.split("-")[1]))
    if saved:
        state = torch.load(saved[-1], weights_only=True)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"] + 1
        print(f"rank {rank}: resuming after epoch {state['epoch']} from {saved[-1]}", flush=True)
    generator = torch.Generator().manual_seed(1234 + rank)
    inputs = torch.randn(64, 4, generator=generator)
    targets = inputs @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    loss = torch.tensor(0.0)
    for epoch in range(start, args.epochs):
        for step in range(8):
            batch = slice(step * 8, step * 8 + 8)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs[batch]), targets[batch])
            loss.backward()
            optimizer.step()
        if rank == 0:
            checkpoints.mkdir(exist_ok=True)
            state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
            torch.save(state, checkpoints / f"epoch-{epoch}.pt")
            print(f"epoch {epoch} loss {loss.item():.6f}", flush=True)
        dist.barrier()
        if rank == 0 and os.environ.get("PAUSE_AFTER_EPOCH") == str(epoch):
            signal.pause()  # the test kills the job here
    if rank == 0:
        Path("outputs").mkdir(exist_ok=True)
        torch.save(model.module.state_dict(), "outputs/model.pt")
        summary = {"world_size": world, "started_at_epoch": start, "loss": loss.item()}
        Path("outputs/summary.json").write_text(json.dumps(summary))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
