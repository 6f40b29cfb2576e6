"""A small PyTorch training loop to try Probing on.

    PROBING=1 python3 examples/train.py          # with the agent from the start
    python3 examples/train.py & probing -t $! inject   # or put it in later

It trains a two-layer MLP on a synthetic regression task, forever unless
--steps is given, printing the loss now and then.  Nothing here knows
about Probing.
"""
import argparse
import time

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(32, width), nn.ReLU())
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


def make_batch(batch_size, generator):
    x = torch.randn(batch_size, 32, generator=generator)
    y = x[:, :4].sum(dim=1, keepdim=True) + 0.1 * torch.randn(
        batch_size, 1, generator=generator)
    return x, y


def train_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def train(steps, batch_size, sleep):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    while steps <= 0 or step < steps:
        x, y = make_batch(batch_size, generator)
        loss = train_step(model, optimizer, x, y)
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        step += 1
        if sleep:
            time.sleep(sleep)
    return loss.item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=0,
                        help="steps to run (0: forever)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--sleep", type=float, default=0.0,
                        help="seconds to sleep after each step")
    args = parser.parse_args()
    final = train(args.steps, args.batch_size, args.sleep)
    print(f"done: loss {final:.4f}", flush=True)


if __name__ == "__main__":
    main()
