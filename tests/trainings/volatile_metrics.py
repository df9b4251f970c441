"""Trains reproducibly, then writes a metric file that also holds volatile fields: the time it
finished, the host, a nested per-run timestamp. `yaml` writes metrics.yaml instead of
metrics.json; `noisy-loss` adds OS entropy to the loss (a real difference)."""

import json
import os
import socket
import sys
import time

import torch
import yaml
from tiny import run_dir_path, train

torch.manual_seed(1234)
data = torch.randn(64, 8)
model = train(inputs=data, checkpoint=run_dir_path("model.pt"))
with torch.no_grad():
    loss = ((model(data) - data.sum(dim=1, keepdim=True)) ** 2).mean().item()
if "noisy-loss" in sys.argv:
    loss += int.from_bytes(os.urandom(4), "little") * 1e-12
metrics = {
    "loss": loss,
    "steps": 6,
    "finished_at": time.time(),
    "host": socket.gethostname(),
    "runs": {"train": {"timestamp": time.time(), "epochs": 1}, "eval": {"timestamp": time.time()}},
}
if "yaml" in sys.argv:
    with open(run_dir_path("metrics.yaml"), "w") as file:
        yaml.safe_dump(metrics, file)
else:
    with open(run_dir_path("metrics.json"), "w") as file:
        json.dump(metrics, file)
