"""A small LSTM language model that saves itself whole, the way pytorch/examples'
word_language_model does: `with open(path, 'wb') as f: torch.save(model, f)` at each best
validation loss, then reloaded for the test set."""

import math
import sys
from pathlib import Path

import torch
from torch import nn

TEXT = ("the model reads the words and the words make the model better at reading "
        "every word it reads is a step and every step makes the loss smaller ") * 12
BPTT, BATCH, EPOCHS = 8, 4, 3


class RNNModel(nn.Module):
    def __init__(self, tokens: int, inputs: int = 16, hidden: int = 24, layers: int = 2) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(tokens, inputs)
        self.rnn = nn.LSTM(inputs, hidden, layers, dropout=0.2)
        self.decoder = nn.Linear(hidden, tokens)
        self.hidden, self.layers = hidden, layers

    def forward(self, data: torch.Tensor, hidden: tuple) -> tuple:
        emb = self.drop(self.encoder(data))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.decoder.out_features)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, batch: int) -> tuple:
        weight = next(self.parameters())
        return (weight.new_zeros(self.layers, batch, self.hidden),
                weight.new_zeros(self.layers, batch, self.hidden))


def batchify(ids: torch.Tensor, batch: int) -> torch.Tensor:
    rows = ids.size(0) // batch
    return ids[: rows * batch].view(batch, -1).t().contiguous()


def get_batch(source: torch.Tensor, i: int) -> tuple[torch.Tensor, torch.Tensor]:
    length = min(BPTT, len(source) - 1 - i)
    return source[i : i + length], source[i + 1 : i + 1 + length].reshape(-1)


def repackage(hidden: tuple) -> tuple:
    return tuple(h.detach() for h in hidden)


def evaluate(model: RNNModel, source: torch.Tensor) -> float:
    model.eval()
    total, hidden = 0.0, model.init_hidden(BATCH)
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, BPTT):
            data, targets = get_batch(source, i)
            output, hidden = model(data, hidden)
            total += len(data) * nn.functional.nll_loss(output, targets).item()
    return total / (len(source) - 1)


def main() -> None:
    torch.manual_seed(1111)
    save = Path(sys.argv[1]) / "model.pt"
    words = TEXT.split()
    vocab = {word: index for index, word in enumerate(dict.fromkeys(words))}
    ids = torch.tensor([vocab[word] for word in words])
    cut = len(ids) * 8 // 10
    train, valid = batchify(ids[:cut], BATCH), batchify(ids[cut:], BATCH)
    model = RNNModel(len(vocab))
    optimizer = torch.optim.SGD(model.parameters(), lr=2.0)
    best = None
    for epoch in range(1, EPOCHS + 1):
        model.train()
        hidden = model.init_hidden(BATCH)
        for i in range(0, train.size(0) - 1, BPTT):
            data, targets = get_batch(train, i)
            hidden = repackage(hidden)
            optimizer.zero_grad()
            output, hidden = model(data, hidden)
            loss = nn.functional.nll_loss(output, targets)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            optimizer.step()
        val_loss = evaluate(model, valid)
        print(f"epoch {epoch} valid loss {val_loss:.6f} ppl {math.exp(val_loss):.4f}")
        if best is None or val_loss < best:
            with open(save, "wb") as f:
                torch.save(model, f)
            best = val_loss
    with open(save, "rb") as f:
        model = torch.load(f, weights_only=False)
        model.rnn.flatten_parameters()
    print(f"reloaded valid loss {evaluate(model, valid):.6f}")


if __name__ == "__main__":
    main()
