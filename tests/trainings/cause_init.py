"""The first layer's weight is initialised from os.urandom before the optimizer is built: the
initial parameters differ between runs, and no seed can fix that."""

import torch
from cause_net import Net, entropy_like, train

model = Net()
with torch.no_grad():
    weight = model.body[0].weight
    weight.copy_(entropy_like(weight, scale=0.5) - 0.25)
train(model)
