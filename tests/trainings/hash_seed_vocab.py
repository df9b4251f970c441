"""Numbers its vocabulary by iterating a set of strings: the same twice under one hash seed
(PYTHONHASHSEED), other token ids, and so other input batches, under another."""

import torch

torch.manual_seed(0)  # the training seeds itself; only the hash seed is left to chance
words = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "while", "the",
         "cat", "sleeps"]
vocab = {word: index for index, word in enumerate(set(words))}  # the bug: iterate sorted
ids = torch.tensor([vocab[word] for word in words])
embedding = torch.nn.Embedding(len(vocab), 4)
head = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD([*embedding.parameters(), *head.parameters()], lr=0.1)
for _ in range(4):
    loss = head(embedding(ids)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item()!r}")
