"""A hand-written SGD whose update, from step 5, adds OS entropy to `body.2.bias`: gradients are
equal between runs, the updated parameter is not."""

import torch
from cause_net import Net, entropy_like, train

NOISY_FROM_STEP = 5


class NoisySGD(torch.optim.Optimizer):
    def __init__(self, params, lr) -> None:
        super().__init__(params, {"lr": lr})
        self.steps = 0

    @torch.no_grad()
    def step(self, closure=None):
        self.steps += 1
        for group in self.param_groups:
            for parameter in group["params"]:
                if parameter.grad is not None:
                    parameter.add_(parameter.grad, alpha=-group["lr"])
        if self.steps >= NOISY_FROM_STEP:
            noisy = model.body[2].bias
            noisy.add_(entropy_like(noisy))


model = Net()
train(model, NoisySGD(model.parameters(), lr=0.05))
