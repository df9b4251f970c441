"""The MNIST-style training with no seeding at all: not reproducible as written."""

from mnist_style import train

train()
