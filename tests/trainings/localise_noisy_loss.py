"""From step 3 on, the training loop adds OS entropy to the loss: the forward pass diverges, but
outside any module, so every module reproduces its output and none is named."""

import os

import torch

torch.manual_seed(0)  # the training seeds itself; the gate does not

model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
data = torch.randn(64, 8)
for step in range(1, 7):
    x = data[(step - 1) % 4 * 16:][:16]
    optimizer.zero_grad()
    loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    if step >= 3:
        # In [0, 1): two draws round to the same loss only for about one gate in a million.
        loss = loss + int.from_bytes(os.urandom(4), "little") / 2**32
    loss.backward()
    optimizer.step()
torch.save(model.state_dict(), os.path.join(os.environ.get("REPRO_GATE_RUN_DIR", "."), "model.pt"))
