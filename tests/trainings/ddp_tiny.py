"""Shared by the multi-process trainings: the tiny model under DDP on CPU with gloo, per rank."""

import os
import time

import torch
import torch.distributed as dist
from tiny import TinyNet, run_dir_path
from torch.nn.parallel import DistributedDataParallel

torch.manual_seed(0)  # the training seeds itself; the gate does not

STEPS = 5


def train_rank(rank, world_size, ddp=True, perturb=None, steps=STEPS):
    """Train for `steps` SGD steps on rank `rank`'s shard; `perturb(step, x)` may change a batch.

    With `ddp` the gradients are averaged across ranks; without, each rank trains alone (the
    process group is still initialised, as in a real multi-process job).
    """
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = TinyNet()
    trained = DistributedDataParallel(model) if ddp else model
    optimizer = torch.optim.SGD(trained.parameters(), lr=0.05)
    data = torch.randn(world_size, 64, 8)[rank]  # the same draw on every rank, its own shard
    batches = data.split(16)
    for step in range(1, steps + 1):
        x = batches[(step - 1) % len(batches)]
        if perturb is not None:
            x = perturb(step, x)
        y = x.sum(dim=1, keepdim=True)
        optimizer.zero_grad()
        loss = ((trained(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
    if rank == 0:
        torch.save(model.state_dict(), run_dir_path("model.pt"))
    # Seen under load (torch 2.13, gloo, CPU): ProcessGroupGloo's destructor, run with the GIL
    # held when the last reference goes, joins a gloo worker thread that is itself waiting for
    # the GIL to free a finished collective. So: let every collective finish and its work be
    # freed (sleeping gives the workers the GIL), drop DDP while the group still lives, then
    # destroy the group.
    dist.barrier()
    time.sleep(0.2)
    del trained
    dist.destroy_process_group()


def torchrun_rank():
    """This worker's rank and the world size, as torchrun sets them."""
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
