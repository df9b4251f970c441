"""Calls Tensor.put_(accumulate=False), which torch flags as nondeterministic on every device."""

import torch

target = torch.zeros(10)
index = torch.tensor([1, 3, 3])
for step in range(3):
    target.put_(index, torch.tensor([1.0, 2.0, float(step)]), accumulate=False)  # PUT_LINE
print("done")
