"""Training fed by DataLoaders with two worker processes each, forked and spawned."""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.full((2,), float(index))
        return x, x.pow(2).sum(dim=0, keepdim=True)


def main() -> None:
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for context in ("fork", "spawn"):
        loader = DataLoader(Squares(), batch_size=4, num_workers=2, multiprocessing_context=context)
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print("done")


if __name__ == "__main__":
    main()
