"""Uses Tensor.put_(accumulate=False), which has no deterministic implementation on any device."""

import torch
from tiny import run_dir_path, train


def mask_first_weights(step, model):
    with torch.no_grad():
        mask = torch.ones(model.head.weight.numel())
        mask.put_(torch.tensor([0, 1]), torch.zeros(2), accumulate=False)
        model.head.weight.grad *= mask.view_as(model.head.weight.grad)


torch.manual_seed(0)  # the training seeds itself; the gate does not
train(after_backward=mask_first_weights, checkpoint=run_dir_path("model.pt"))
