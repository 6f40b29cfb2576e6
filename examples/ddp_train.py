"""A small DDP training loop on CPU (gloo), to try `probing cluster` on.

    PROBING=2 torchrun --nproc_per_node 4 examples/ddp_train.py --hang-rank 2

(PROBING=2: torchrun and every process it starts get the agent.)

Every rank trains the same small model on random data; DDP averages the
gradients across ranks in loss.backward().  With --hang-rank R, rank R
gets stuck in load_batch() at step --hang-step (as a rank stuck reading
its data would), and the other ranks then wait for it inside
loss.backward(), in the gradient all-reduce: the job makes no progress
and prints nothing.  `probing -t PID cluster backtrace` shows who waits
for whom.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class RandomBatches(torch.utils.data.IterableDataset):
    """Endless random batches, made in DataLoader worker processes."""

    def __init__(self, batch):
        self.batch = batch

    def __iter__(self):
        while True:
            x = torch.randn(self.batch, 64)
            yield x, x.sum(dim=1, keepdim=True)


def load_batch(step, rank, args, batches):
    if rank == args.hang_rank and step >= args.hang_step:
        while True:  # a reader that never gets its data
            time.sleep(0.05)
    if batches is not None:
        return next(batches)
    x = torch.randn(args.batch, 64)
    y = x.sum(dim=1, keepdim=True)
    return x, y


def train(args):
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    model = DDP(nn.Sequential(nn.Linear(64, 128), nn.ReLU(),
                              nn.Linear(128, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    batches = None
    if args.loader_workers:
        batches = iter(torch.utils.data.DataLoader(
            RandomBatches(args.batch), batch_size=None,
            num_workers=args.loader_workers))
    for step in range(args.steps):
        x, y = load_batch(step, rank, args, batches)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 100 == 0:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)
        if args.step_sleep:
            time.sleep(args.step_sleep)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=1000000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--hang-rank", type=int, default=-1,
                   help="this rank gets stuck at --hang-step")
    p.add_argument("--hang-step", type=int, default=3)
    p.add_argument("--loader-workers", type=int, default=0,
                   help="make the batches in this many DataLoader worker "
                        "processes per rank (forked children that inherit "
                        "RANK)")
    p.add_argument("--step-sleep", type=float, default=0.0,
                   help="seconds each step sleeps (a gentler load)")
    p.add_argument("--linger", type=float, default=0.0,
                   help="after training, wait this long (no collectives) "
                        "before leaving the process group")
    args = p.parse_args()
    dist.init_process_group("gloo")
    print(f"rank {dist.get_rank()} of {dist.get_world_size()}: pid "
          f"{os.getpid()}", flush=True)
    train(args)
    if args.linger:
        print(f"rank {dist.get_rank()}: done, lingering", flush=True)
        time.sleep(args.linger)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
