"""A deterministic DDP training started with torch.multiprocessing.spawn: 2 ranks, gloo on CPU."""

import os
import socket
import sys

import torch.multiprocessing as mp
from ddp_tiny import train_rank


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(rank, world_size):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    train_rank(rank, world_size)


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    mp.spawn(main, args=(2,), nprocs=2)
