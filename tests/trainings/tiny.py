"""A tiny real training shared by the test scripts beside it: two layers, SGD, a checkpoint."""

import os

import torch


class TinyNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = torch.nn.Linear(8, 16)
        self.head = torch.nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.encoder(x)))


PARAMETERS = ["encoder.weight", "encoder.bias", "head.weight", "head.bias"]


def train(steps=6, inputs=None, after_backward=None, checkpoint="model.pt", batch_size=16):
    """Train for `steps` SGD steps on mini-batches taken in order from `inputs`.

    `after_backward(step, model)` may touch the gradients before the optimizer step.
    """
    model = TinyNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.randn(64, 8) if inputs is None else inputs
    batches = data.split(batch_size)
    for step in range(1, steps + 1):
        x = batches[(step - 1) % len(batches)]
        y = x.sum(dim=1, keepdim=True)
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        if after_backward is not None:
            after_backward(step, model)
        optimizer.step()
    torch.save(model.state_dict(), checkpoint)
    return model


def run_dir_path(name):
    """Where the gate wants outputs (the current directory when run by hand)."""
    return os.path.join(os.environ.get("REPRO_GATE_RUN_DIR", "."), name)
