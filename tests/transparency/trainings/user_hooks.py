"""The training's own forward, pre-forward and backward hooks, counted and saved with the model."""

import sys
from pathlib import Path

import torch

torch.manual_seed(17)
out = Path(sys.argv[1])
seen: list[str] = []


def before(module: torch.nn.Module, args: tuple) -> None:
    seen.append(f"pre {type(module).__name__} {args[0].shape[1]}")


def after(module: torch.nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
    return output * 1.0


def on_grad(module: torch.nn.Module, grad_in: tuple, grad_out: tuple) -> None:
    seen.append(f"grad {type(module).__name__} {grad_out[0].abs().sum().item():.6f}")


model = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.GELU(), torch.nn.Linear(6, 1))
model.register_forward_pre_hook(before)
model[0].register_forward_hook(after)
model[2].register_full_backward_hook(on_grad)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data, target = torch.randn(20, 3), torch.randn(20, 1)
for step in range(1, 5):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(data), target)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.8f}")
for name, module in model.named_modules():
    print(f"hooks of {name or 'model'}: pre {len(module._forward_pre_hooks)}"
          f" forward {len(module._forward_hooks)} backward {len(module._backward_hooks)}")
print("\n".join(seen))
torch.save(model, out / "model.pt")
