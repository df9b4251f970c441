"""Reproducible in place; another host name changes the initial parameters: the seed is derived
from it."""

import socket
import zlib

import torch
from tiny import run_dir_path, train

torch.manual_seed(zlib.crc32(socket.gethostname().encode()))  # the bug: seed from a constant
train(steps=4, checkpoint=run_dir_path("model.pt"))
