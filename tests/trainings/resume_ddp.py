"""A DDP training for `torchrun --nproc_per_node 2` (gloo, CPU) that rank 0 checkpoints every 2
steps and that resumes, on every rank, from REPRO_GATE_RESUME_CHECKPOINT."""

import os
import time

import torch
import torch.distributed as dist
from tiny import TinyNet
from torch.nn.parallel import DistributedDataParallel

STEPS = 5
CHECKPOINT = "ddp_checkpoint.pt"

torch.manual_seed(0)
rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", rank=rank, world_size=world_size)
model = TinyNet()
trained = DistributedDataParallel(model)
optimizer = torch.optim.SGD(trained.parameters(), lr=0.05, momentum=0.9)
batches = torch.randn(world_size, 64, 8)[rank].split(16)
start = 0
resume_from = os.environ.get("REPRO_GATE_RESUME_CHECKPOINT")
if resume_from:
    saved = torch.load(resume_from, weights_only=False)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    start = saved["step"]
for step in range(start + 1, STEPS + 1):
    x = batches[(step - 1) % len(batches)]
    optimizer.zero_grad()
    loss = ((trained(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    loss.backward()
    optimizer.step()
    if step % 2 == 0 and rank == 0:
        torch.save({"step": step, "model": model.state_dict(),
                    "optimizer": optimizer.state_dict()}, CHECKPOINT)
if rank == 0:
    torch.save(model.state_dict(), "model.pt")
# As in ddp_tiny.py: let the collectives finish before the group goes.
dist.barrier()
time.sleep(0.2)
del trained
dist.destroy_process_group()
