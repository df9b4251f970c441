"""A deterministic DDP training for `torchrun --nproc_per_node 2`: gloo on CPU."""

from ddp_tiny import torchrun_rank, train_rank

train_rank(*torchrun_rank())
