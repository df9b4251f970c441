"""A resumable training for the resume check: a checkpoint every 2 steps, and on
REPRO_GATE_RESUME_CHECKPOINT a resume that restores everything but `--forget WHAT`.

    resume_train.py [--forget buffers|data_order|torch_rng|numpy_rng|lr_schedule|optimizer|
                              grad_scaler] [--steps N] [--no-checkpoint]

Everything a resume must restore is here: BatchNorm's running statistics, a shuffling
DataLoader with 2 workers (its own generator), dropout (torch's generator), numpy noise, Adam's
moments, a schedule that depends on the step, and a gradient scaler under CPU autocast whose
scale grows until a step overflows and is skipped.
"""

import argparse
import itertools
import os

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

BATCH = 16
SAVE_EVERY = 2
CHECKPOINT = os.path.join("checkpoints", "last.pt")

parser = argparse.ArgumentParser()
parser.add_argument("--forget", default="")
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--no-checkpoint", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
np.random.seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Tanh(),
                            torch.nn.Dropout(0.2), torch.nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 1.0 / (1 + epoch))
# The scale doubles every step until a step's gradients overflow; that step is skipped.
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**123, growth_interval=1)
data = TensorDataset(torch.randn(96, 8, generator=torch.Generator().manual_seed(1)))
order = torch.Generator()
loader = DataLoader(data, batch_size=BATCH, shuffle=True, num_workers=2, generator=order)
per_epoch = len(loader)


def save(step: int) -> None:
    os.makedirs("checkpoints", exist_ok=True)
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "schedule": schedule.state_dict(), "scaler": scaler.state_dict(),
                "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state()},
               CHECKPOINT)


def restore(path: str) -> int:
    saved = torch.load(path, weights_only=False)
    parameters_only = {name: value for name, value in saved["model"].items()
                       if "running" not in name and "batches_tracked" not in name}
    model.load_state_dict(parameters_only if args.forget == "buffers" else saved["model"],
                          strict=args.forget != "buffers")
    if args.forget != "optimizer":
        optimizer.load_state_dict(saved["optimizer"])
    if args.forget != "lr_schedule":
        schedule.load_state_dict(saved["schedule"])
    for group, lr in zip(optimizer.param_groups, schedule.get_last_lr(), strict=True):
        group["lr"] = lr
    if args.forget != "grad_scaler":
        scaler.load_state_dict(saved["scaler"])
    if args.forget != "torch_rng":
        torch.set_rng_state(saved["torch_rng"])
    if args.forget != "numpy_rng":
        np.random.set_state(saved["numpy_rng"])
    return saved["step"]


def batches(start: int):
    """The batches from step `start` + 1 on: each epoch's order from its own seed, the batches
    already trained on skipped (unless the data order is what this resume forgets)."""
    epoch, done = divmod(start, per_epoch)
    if args.forget == "data_order":
        done = 0
    while True:
        order.manual_seed(100 + epoch)
        yield from itertools.islice(loader, done, None)
        epoch, done = epoch + 1, 0


checkpoint = os.environ.get("REPRO_GATE_RESUME_CHECKPOINT")
start = restore(checkpoint) if checkpoint else 0
model.train()
for step, (x,) in zip(range(start + 1, args.steps + 1), batches(start), strict=False):
    x = x + torch.from_numpy(np.random.randn(*x.shape)).float() * 0.01
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = ((model(x).float() - x.sum(dim=1, keepdim=True)) ** 2).mean()
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    schedule.step()
    if step % SAVE_EVERY == 0 and not args.no_checkpoint:
        save(step)
torch.save(model.state_dict(), "model.pt")
