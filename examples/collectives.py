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
  skip      it skips the all_reduce and wraps a model in
            DistributedDataParallel, whose broadcast of the model's state
            torch makes in C++ (no call of torch.distributed's Python API)

and the other ranks wait in their all_reduce for ever (gloo's timeout is
set to an hour) — except after `die`, where gloo sees the connection to
the dead rank close and their all_reduce fails: they report the error and
stay up (--linger) as a job that catches it would.  `probing -t PID
cluster hang` says which rank is where.
"""
import argparse
import datetime
import json
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


# With --torch-seq: [op, torch's own sequence number of the call in the
# default group, or None where torch gave it none], one per call.
numbers = None


def call(op, *args, **kwargs):
    """dist.<op>(...), noting torch's number for it in `numbers`."""
    if numbers is None:
        return getattr(dist, op)(*args, **kwargs)
    pg = dist.distributed_c10d._get_default_group()
    before = pg._get_sequence_number_for_group()
    out = getattr(dist, op)(*args, **kwargs)
    after = pg._get_sequence_number_for_group()
    numbers.append([op, after if after != before else None])
    return out


def one_round(step, rank, world, args):
    x = load_batch(step, rank, args)
    faulty = rank == args.fault_rank and step == args.fault_round
    while faulty and args.fault_when and not os.path.exists(args.fault_when):
        time.sleep(0.05)  # the fault when someone says so
    if faulty and args.fault == "die":
        os._exit(3)
    if faulty and args.fault == "mismatch":
        call("broadcast", x, src=0)
    elif faulty and args.fault == "skip":
        torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8))
    else:
        call("all_reduce", x)
    call("broadcast", x, src=0)
    out = [torch.zeros(16, 8) for _ in range(world)]
    call("all_gather", out, x)
    right, left = (rank + 1) % world, (rank - 1) % world
    got = torch.zeros(4, dtype=torch.int64)
    reqs = [call("isend", torch.arange(4) + rank, right),
            call("irecv", got, left)]
    for r in reqs:
        r.wait()
    w = call("all_reduce", torch.ones(3), async_op=True)
    w.wait()
    call("barrier")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--fault", choices=["mismatch", "late", "die", "skip"])
    p.add_argument("--fault-rank", type=int, default=3)
    p.add_argument("--fault-round", type=int, default=2)
    p.add_argument("--fault-when", metavar="FILE",
                   help="the faulty rank goes wrong once FILE exists")
    p.add_argument("--linger", type=float, default=600,
                   help="seconds to stay alive after the rounds")
    p.add_argument("--torch-seq", metavar="DIR",
                   help="write torch's own sequence number of each call "
                        "to DIR/rank-RANK.json (a JSON list of [op, "
                        "number or null])")
    args = p.parse_args()
    global numbers
    if args.torch_seq:
        numbers = []
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} of {world}: pid {os.getpid()}", flush=True)
    try:
        for step in range(args.rounds):
            one_round(step, rank, world, args)
        if numbers is not None:
            path = os.path.join(args.torch_seq, f"rank-{rank}.json")
            with open(path + ".tmp", "w") as f:
                json.dump(numbers, f)
            os.rename(path + ".tmp", path)
        print(f"rank {rank}: {args.rounds} rounds done", flush=True)
    except RuntimeError as e:
        print(f"rank {rank}: {e}", flush=True)
    time.sleep(args.linger)


if __name__ == "__main__":
    main()
