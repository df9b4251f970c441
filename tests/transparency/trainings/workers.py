"""A DataLoader with two worker processes started by `fork` or `spawn` (argv[2])."""

import sys
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info


class Samples(Dataset):
    def __init__(self) -> None:
        self.data = torch.randn(48, 5)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        info = get_worker_info()
        noise = torch.rand(5) * 0.01  # from the worker's own seed
        return self.data[index] + noise, self.data[index].sum(dim=0, keepdim=True), info.id


def main() -> None:
    torch.manual_seed(23)
    out, method = Path(sys.argv[1]), sys.argv[2]
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(Samples(), batch_size=8, shuffle=True, num_workers=2,
                        multiprocessing_context=method,
                        generator=torch.Generator().manual_seed(29))
    for epoch in range(2):
        for x, y, workers in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            print(f"epoch {epoch} workers {workers.tolist()} loss {loss.item():.8f}")
    torch.save(model, out / "model.pt")


if __name__ == "__main__":
    main()
