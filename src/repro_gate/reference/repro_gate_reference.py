"""Reference training of repro-gate: a small but real training run to check an environment with.

Run as `python -m repro_gate_reference` with this directory on PYTHONPATH. It needs only the
standard library and torch. It exercises ops whose CUDA kernels are nondeterministic by default
(Embedding backward, index_add_), a Conv2d, and an Adam optimizer, on synthetic data derived from
the seed, then writes `model.pt` and `metrics.json` into the output directory.

It seeds itself, as every training should (the gate seeds nothing unless `seed` is set): with
`--seed`, else the gate's seed when the gate was given one, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import torch
from torch import nn


class ReferenceNet(nn.Module):
    """Tokens and an image in, one score per bucket-mixed sample out."""

    def __init__(self, vocab: int, width: int, buckets: int) -> None:
        super().__init__()
        self.buckets = buckets
        self.embedding = nn.Embedding(vocab, width)
        self.conv = nn.Conv2d(3, width, kernel_size=3, padding=1)
        self.mix = nn.Linear(2 * width, width)
        self.head = nn.Linear(width, 1)

    def forward(
        self, tokens: torch.Tensor, images: torch.Tensor, bucket_of: torch.Tensor
    ) -> torch.Tensor:
        words = self.embedding(tokens).mean(dim=1)
        pixels = torch.relu(self.conv(images)).mean(dim=(2, 3))
        features = torch.relu(self.mix(torch.cat([words, pixels], dim=1)))
        # Sum samples into buckets: index_add_ uses atomics on CUDA unless determinism is on.
        pooled = features.new_zeros(self.buckets, features.shape[1])
        pooled.index_add_(0, bucket_of, features)
        predicted: torch.Tensor = self.head(features + pooled[bucket_of]).squeeze(1)
        return predicted


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="repro_gate_reference", description="Reference training run for repro-gate."
    )
    parser.add_argument("--steps", type=int, default=30, help="optimizer steps (default 30)")
    parser.add_argument("--batch-size", type=int, default=32, help="samples per step")
    parser.add_argument("--width", type=int, default=32, help="hidden width")
    parser.add_argument("--vocab", type=int, default=1000, help="embedding rows")
    parser.add_argument("--image-size", type=int, default=16, help="side of the square images")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--seed", type=int, default=None,
                        help="default: the gate's seed ($REPRO_GATE_SEED) when it has one, else 0")
    parser.add_argument(
        "--out", type=Path, default=None, help="default: $REPRO_GATE_RUN_DIR, else the cwd"
    )
    args = parser.parse_args(argv)
    for name in ("steps", "batch_size", "width", "vocab", "image_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.seed is None:
        try:
            args.seed = int(os.environ.get("REPRO_GATE_SEED") or 0)
        except ValueError:
            parser.error("REPRO_GATE_SEED must be an integer")
    if args.out is None:
        args.out = Path(os.environ.get("REPRO_GATE_RUN_DIR") or os.getcwd())
    return args


def pick_device(choice: str) -> torch.device:
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("repro_gate_reference: --device cuda, but CUDA is not available")
    return torch.device(choice)


def synthetic_batch(
    generator: torch.Generator, args: argparse.Namespace, buckets: int
) -> tuple[torch.Tensor, ...]:
    """One batch of inputs and targets, a function of the generator's state only."""
    size = args.batch_size
    tokens = torch.randint(0, args.vocab, (size, 8), generator=generator)
    images = torch.randn(size, 3, args.image_size, args.image_size, generator=generator)
    bucket_of = torch.randint(0, buckets, (size,), generator=generator)
    targets = (tokens.float().mean(dim=1) / args.vocab) + images.mean(dim=(1, 2, 3))
    return tokens, images, bucket_of, targets


def train(args: argparse.Namespace) -> dict[str, object]:
    """Train, save the checkpoint, and return the metrics."""
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = pick_device(args.device)
    buckets = max(1, args.batch_size // 4)
    model = ReferenceNet(args.vocab, args.width, buckets).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(args.seed)
    started = time.perf_counter()
    losses = []
    for _ in range(args.steps):
        batch = [t.to(device) for t in synthetic_batch(data, args, buckets)]
        tokens, images, bucket_of, targets = batch
        loss = nn.functional.mse_loss(model(tokens, images, bucket_of), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict()}, args.out / "model.pt"
    )
    metrics = {
        "final_loss": losses[-1],
        "first_loss": losses[0],
        "steps": args.steps,
        "seed": args.seed,
        "device": str(device),
    }
    # Timing goes to stdout only: metrics.json is compared bit for bit between runs.
    print(f"repro_gate_reference: trained in {time.perf_counter() - started:.2f}s")
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n", "utf-8")
    return metrics


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    metrics = train(args)
    print(f"repro_gate_reference: {metrics['steps']} steps, final loss {metrics['final_loss']:.6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
