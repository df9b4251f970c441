"""A DDP training for `torchrun --nproc_per_node 2` (gloo on CPU) whose rank 0 alone saves a
checkpoint every SAVE_EVERY steps: resume_probe_ddp.py STEPS SAVE_EVERY."""

import os
import sys
import time

import torch
import torch.distributed as dist
from tiny import TinyNet
from torch.nn.parallel import DistributedDataParallel

steps, save_every = int(sys.argv[1]), int(sys.argv[2])
rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.manual_seed(0)
dist.init_process_group("gloo", rank=rank, world_size=world_size)
model = TinyNet()
trained = DistributedDataParallel(model)
optimizer = torch.optim.SGD(trained.parameters(), lr=0.05)
batches = torch.randn(world_size, 64, 8)[rank].split(16)
for step in range(1, steps + 1):
    x = batches[(step - 1) % len(batches)]
    optimizer.zero_grad()
    loss = ((trained(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    loss.backward()
    optimizer.step()
    if rank == 0 and step % save_every == 0:
        torch.save({"model": model.state_dict(), "step": step}, "ckpt.pt")
# As ddp_tiny.py: let the collectives finish before the group goes.
dist.barrier()
time.sleep(0.2)
del trained
dist.destroy_process_group()
