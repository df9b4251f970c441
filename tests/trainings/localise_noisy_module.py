"""From step 3 on, module `body.N` (a `Noisy`) adds OS entropy to its output: no seed fixes that,
and the forward pass diverges there while its inputs are equal.

`python localise_noisy_module.py [plain|dropout|inplace|quiet]`: `plain` is Linear, Noisy, Linear
(the module is `body.1`); `dropout` puts a seeded Dropout before it (`body.2`), `inplace` a
LeakyReLU and a ReLU that change their input in place (`body.4`). Neither may be taken for the
divergent module: run again from the same inputs and random state, they give the same output.
`quiet` has a BatchNorm, a Dropout and a `Warmup` whose output depends on state its forward
updates, and no noise: it is reproducible. In `root` the noise is added by the outermost module's
own forward, outside its submodules.
"""

import os
import sys

import torch

torch.manual_seed(0)  # the training seeds itself; the gate does not

VARIANT = sys.argv[1] if len(sys.argv) > 1 else "plain"
NOISE_FROM_STEP = 3
step = 0


def with_entropy(x: torch.Tensor) -> torch.Tensor:
    if step < NOISE_FROM_STEP:
        return x
    # In [0, 1): wide enough that two draws change the loss by more than its rounding, but
    # for about one gate in a million (at 1e-3, one in a few thousand).
    return x + int.from_bytes(os.urandom(4), "little") / 2**32


class Noisy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if VARIANT in ("quiet", "root") else with_entropy(x)


class Warmup(torch.nn.Module):
    """Deterministic, from state its own forward updates: a call count and a buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.seen += 1
        return x * (1 + self.calls / 1000) + self.seen / 1000


def body() -> torch.nn.Sequential:
    before = {
        "plain": [],
        "dropout": [torch.nn.Dropout(0.25)],
        "inplace": [
            torch.nn.LeakyReLU(0.1, inplace=True),  # run twice on its output, it would differ
            torch.nn.Linear(16, 16),
            torch.nn.ReLU(inplace=True),
        ],
        "quiet": [torch.nn.BatchNorm1d(16), torch.nn.Dropout(0.25), Warmup()],
        "root": [],
    }[VARIANT]
    return torch.nn.Sequential(torch.nn.Linear(8, 16), *before, Noisy(), torch.nn.Linear(16, 1))


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = body()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return with_entropy(self.body(x)) if VARIANT == "root" else self.body(x)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
data = torch.randn(64, 8)
for step in range(1, 7):
    x = data[(step - 1) % 4 * 16:][:16]
    optimizer.zero_grad()
    loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    loss.backward()
    optimizer.step()
torch.save(model.state_dict(), os.path.join(os.environ.get("REPRO_GATE_RUN_DIR", "."), "model.pt"))
