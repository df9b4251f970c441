"""The tiny training the golden trajectory tests change: its loss is a sum that a test can
reorder (other rounding, the code's change) or scale through a package (the environment's), its
layer an attribute a test can rename, and its seeding call a line a test can move."""

TRAIN = """\
import torch
{imports}


class Regression(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.{layer} = torch.nn.Linear(4, 1)

    def forward(self, inputs):
        return self.{layer}(inputs)


torch.manual_seed(0)
model = Regression()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
inputs = torch.randn(64, 4){scale}
targets = torch.randn(64, 1)
for step in range(1, 6):
    optimizer.zero_grad()
    squared = (model(inputs) - targets) ** 2
    loss = {total} / squared.numel()
    loss.backward()
    optimizer.step()
torch.save(model.state_dict(), "model.pt")
"""
SUM = "squared.sum()"
# The same numbers, written another way.
NEUTRAL = "torch.sum(squared)"
# From step 3 on, the sum adds the same numbers in the reverse order: other rounding.
REORDERED_SUM = "(squared.flip(0).sum() if step >= 3 else squared.sum())"
SEEDING = "torch.manual_seed(0)\n"


def training(total: str = SUM, numlib: bool = False, layer: str = "fc") -> str:
    return TRAIN.format(imports="import numlib" if numlib else "", total=total,
                        scale=" * numlib.SCALE" if numlib else "", layer=layer)


def seeded_first(text: str) -> str:
    """`text` with its seeding call moved up, right below `import torch`: the same numbers."""
    return text.replace(SEEDING, "", 1).replace("import torch\n", "import torch\n" + SEEDING, 1)
