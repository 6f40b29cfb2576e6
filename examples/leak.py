"""A training loop whose memory grows, to find with Probing.

    PROBING=1 python3 examples/leak.py --sleep 0.01
    probing -t PID query "SELECT ts, rss FROM process.memory"   # grows
    probing -t PID memory                                       # Tensor count climbs
    probing -t PID query "SELECT holder, grad_fn FROM python.tensors"

Every step also evaluates the model on a held-out batch and keeps the
validation loss in a list, to print the epoch's average later.  The bug:
the evaluation runs with autograd on and the list keeps the loss tensor
itself, so each one keeps its whole autograd graph alive, with the
activations the forward pass saved for a backward pass that never comes
(about 0.5 MiB a step here).  The fix is one of `with torch.no_grad():`
around the evaluation or `history.append(val_loss.item())`.
docs/torch.md walks through finding it.
"""
import argparse
import time

import torch
from torch import nn

history = []  # validation losses, for the epoch average (the leak)


class MLP(nn.Module):
    def __init__(self, width=512):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(32, width), nn.ReLU())
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


def make_batch(batch_size, generator):
    x = torch.randn(batch_size, 32, generator=generator)
    y = x[:, :4].sum(dim=1, keepdim=True)
    return x, y


def train(steps, batch_size, sleep):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    while steps <= 0 or step < steps:
        x, y = make_batch(batch_size, generator)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()

        vx, vy = make_batch(batch_size, generator)
        val_loss = nn.functional.mse_loss(model(vx), vy)
        history.append(val_loss)  # keeps val_loss's graph alive
        if step % 100 == 0:
            avg = sum(history) / len(history)
            print(f"step {step} loss {loss.item():.4f} "
                  f"val {avg.item():.4f}", flush=True)
        step += 1
        if sleep:
            time.sleep(sleep)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=0,
                        help="steps to run (0: forever)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--sleep", type=float, default=0.01,
                        help="seconds to sleep after each step")
    args = parser.parse_args()
    train(args.steps, args.batch_size, args.sleep)


if __name__ == "__main__":
    main()
