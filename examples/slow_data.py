"""A training loop starved by its data loading, to find with Probing.

    PROBING=1 python3 examples/slow_data.py
    probing -t PID diagnose dataloader      # most of the time is loading
    probing -t PID diagnose slow            # ... in augment()

The model is small and quick; every sample goes through augment(), a
per-pixel Python loop standing in for image decoding and augmentation
done in Python.  With the default --workers 0 the DataLoader runs it on
the training thread, one batch at a time, and the training loop spends
most of its time waiting for data.  More workers (--workers 4) or a
vectorized augment() is the fix.
"""
import argparse
import random

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def augment(pixels):
    # Jitter each value: a Python loop over every element (slow on purpose).
    return [p + random.uniform(-0.01, 0.01) for p in pixels]


class Images(Dataset):
    def __init__(self, n, size):
        self.n = n
        self.size = size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        pixels = augment([0.5] * self.size)
        x = torch.tensor(pixels)
        return x, x.mean().unsqueeze(0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--persistent-workers", action="store_true",
                   help="keep the workers from one epoch to the next")
    p.add_argument("--epochs", type=int, default=1000000)
    p.add_argument("--size", type=int, default=3 * 32 * 32)
    args = p.parse_args()
    torch.manual_seed(0)
    data = DataLoader(Images(256, args.size), batch_size=16,
                      num_workers=args.workers,
                      persistent_workers=args.persistent_workers and
                      args.workers > 0)
    model = nn.Sequential(nn.Linear(args.size, 32), nn.ReLU(),
                          nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        for x, y in data:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
