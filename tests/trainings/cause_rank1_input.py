"""Under torchrun, a DDP training whose rank 1 adds OS entropy to its batch from step 3. After
the all-reduce both ranks' gradients and parameters differ, but the evidence starts on rank 1:
its input differs, rank 0's does not."""

from cause_net import entropy_like
from ddp_tiny import torchrun_rank, train_rank


def perturb(step, x):
    return x + entropy_like(x) if step >= 3 else x


rank, world_size = torchrun_rank()
train_rank(rank, world_size, perturb=perturb if rank == 1 else None)
