"""A resumable training for the probe's resume tests: every generator, a buffer, Adam, a schedule.

    resume_probe_train.py STEPS SAVE_EVERY FORMAT [--forget WHAT] [--lr LR] [--numpy-seed N]
                          [--scaler]

Saves a checkpoint every SAVE_EVERY steps in FORMAT: `torch` (ckpt.pt), `file` (ckpt.pt, through
an open file), `rename` (ckpt.pt.tmp,
then os.replace to ckpt.pt), `safetensors` (state.pt, then model.safetensors), `dcp` (state.pt,
then the model in dcp_ckpt/ by torch.distributed.checkpoint) or `none`. With
REPRO_GATE_RESUME_CHECKPOINT set it resumes from that checkpoint (`torch` and `rename` only),
restoring everything but WHAT (`numpy`: numpy's generator, `lr`: the schedule, `buffers`: the
running statistics). `--scaler`: the loss goes through a CPU GradScaler (initial scale 2**10).
Prints each step's loss as `step N loss HEX`.
"""

import argparse
import os
import random

import numpy as np
import torch


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = torch.nn.Linear(8, 16)
        self.norm = torch.nn.BatchNorm1d(16)
        self.drop = torch.nn.Dropout(0.2)
        self.head = torch.nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(torch.tanh(self.norm(self.encoder(x)))))


parser = argparse.ArgumentParser()
parser.add_argument("steps", type=int)
parser.add_argument("save_every", type=int)
parser.add_argument("format", choices=["torch", "file", "rename", "safetensors", "dcp", "none"])
parser.add_argument("--forget", default="")
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--numpy-seed", type=int, default=0)
parser.add_argument("--scaler", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
np.random.seed(args.numpy_seed)
random.seed(0)
data = torch.randn(96, 8)
model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, enabled=args.scaler)
start = 0


def state() -> dict:
    return {"optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
            "rng": (torch.get_rng_state(), np.random.get_state(), random.getstate())}


def save(step: int) -> None:
    full = {"model": model.state_dict(), "step": step, **state()}
    if args.format == "torch":
        torch.save(full, "ckpt.pt")
    elif args.format == "file":
        with open("ckpt.pt", "wb") as handle:
            torch.save(full, handle)
    elif args.format == "rename":
        torch.save(full, "ckpt.pt.tmp")
        os.replace("ckpt.pt.tmp", "ckpt.pt")
    elif args.format == "safetensors":
        from safetensors.torch import save_file

        torch.save({"step": step, **state()}, "state.pt")
        save_file(model.state_dict(), "model.safetensors")
    elif args.format == "dcp":
        import torch.distributed.checkpoint as dcp

        torch.save({"step": step, **state()}, "state.pt")
        dcp.save({"model": model.state_dict()}, checkpoint_id="dcp_ckpt")


def restore(path: str) -> int:
    saved = torch.load(path, weights_only=False)
    buffers = {k: v.clone() for k, v in model.state_dict().items() if "running" in k}
    model.load_state_dict(saved["model"])
    if args.forget == "buffers":
        model.load_state_dict({**model.state_dict(), **buffers})
    optimizer.load_state_dict(saved["optimizer"])
    if args.forget != "lr":
        schedule.load_state_dict(saved["schedule"])
    torch_state, numpy_state, random_state = saved["rng"]
    torch.set_rng_state(torch_state)
    if args.forget != "numpy":
        np.random.set_state(numpy_state)
    random.setstate(random_state)
    return saved["step"]


checkpoint = os.environ.get("REPRO_GATE_RESUME_CHECKPOINT")
if checkpoint:
    start = restore(checkpoint)
    print(f"resumed at step {start}", flush=True)

batches = data.split(16)
for step in range(start + 1, args.steps + 1):
    x = batches[(step - 1) % len(batches)]
    x = x + torch.from_numpy(np.random.randn(*x.shape)).float() * 0.01 * random.random()
    y = x.sum(dim=1, keepdim=True)
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    schedule.step()
    print(f"step {step} loss {float.hex(loss.item())}", flush=True)
    if args.format != "none" and step % args.save_every == 0:
        save(step)
torch.save(model.state_dict(), "model.pt")
