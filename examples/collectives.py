"""torch.distributed collectives on CPU (gloo), healthy or hanging on purpose.

    PROBING=2 torchrun --nproc_per_node 4 examples/collectives.py
    PROBING=2 torchrun --nproc_per_node 4 examples/collectives.py --fault mismatch --fault-rank 3

Every rank runs the same rounds of collectives (all_reduce, broadcast,
all_gather, a send/recv ring with isend/irecv, barrier) on small tensors,
then waits in a final barrier-free sleep so that it can be looked at.  With
--fault, rank --fault-rank goes wrong in round --fault-round:

  mismatch  it calls broadcast where the others call all_reduce
  late      it never reaches the all_reduce (stuck in load_batch())
  die       it exits (os._exit(3)) before the all_reduce

and the other ranks wait in their all_reduce for ever (gloo's timeout is
set to an hour) — except after `die`, where gloo sees the connection to
the dead rank close and their all_reduce fails: they report the error and
stay up (--linger) as a job that catches it would.  `probing -t PID
cluster hang` says which rank is where.
"""
import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist


def load_batch(step, rank, args):
    if args.fault == "late" and rank == args.fault_rank and \
            step >= args.fault_round:
        while True:  # a reader that never gets its data
            time.sleep(0.05)
    return torch.full((16, 8), float(rank + step))


def one_round(step, rank, world, args):
    x = load_batch(step, rank, args)
    faulty = rank == args.fault_rank and step == args.fault_round
    while faulty and args.fault_when and not os.path.exists(args.fault_when):
        time.sleep(0.05)  # the fault when someone says so
    if faulty and args.fault == "die":
        os._exit(3)
    if faulty and args.fault == "mismatch":
        dist.broadcast(x, src=0)
    else:
        dist.all_reduce(x)
    dist.broadcast(x, src=0)
    out = [torch.zeros(16, 8) for _ in range(world)]
    dist.all_gather(out, x)
    right, left = (rank + 1) % world, (rank - 1) % world
    got = torch.zeros(4, dtype=torch.int64)
    reqs = [dist.isend(torch.arange(4) + rank, right),
            dist.irecv(got, left)]
    for r in reqs:
        r.wait()
    w = dist.all_reduce(torch.ones(3), async_op=True)
    w.wait()
    dist.barrier()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--fault", choices=["mismatch", "late", "die"])
    p.add_argument("--fault-rank", type=int, default=3)
    p.add_argument("--fault-round", type=int, default=2)
    p.add_argument("--fault-when", metavar="FILE",
                   help="the faulty rank goes wrong once FILE exists")
    p.add_argument("--linger", type=float, default=600,
                   help="seconds to stay alive after the rounds")
    args = p.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} of {world}: pid {os.getpid()}", flush=True)
    try:
        for step in range(args.rounds):
            one_round(step, rank, world, args)
        print(f"rank {rank}: {args.rounds} rounds done", flush=True)
    except RuntimeError as e:
        print(f"rank {rank}: {e}", flush=True)
    time.sleep(args.linger)


if __name__ == "__main__":
    main()
