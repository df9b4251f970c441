"""Under torchrun, rank 1 adds OS entropy to its batch from step 3; ranks train alone (no DDP),
so rank 0's trajectory stays equal and the evidence starts on rank 1."""

import os

from ddp_tiny import torchrun_rank, train_rank


def perturb(step, x):
    if step < 3:
        return x
    # In [0, 1): two draws round to the same batch only for about one gate in a million.
    return x + int.from_bytes(os.urandom(4), "little") / 2**32


rank, world_size = torchrun_rank()
train_rank(rank, world_size, ddp=False, perturb=perturb if rank == 1 else None)
