"""A server-shaped asyncio program, standard library only (docs/asyncio.md).

A line server on asyncio streams with a client that sends one request and
waits for more; a queue with workers; a lock held across an await and a
request waiting for it; idle tasks.  One of the faults on request:

  python3 asyncio_server.py                # serves; every task waits
  python3 asyncio_server.py --deadlock     # two tasks awaiting each other
  python3 asyncio_server.py --block        # a coroutine blocks the loop
  python3 asyncio_server.py --idle 10000   # that many idle tasks too
  python3 asyncio_server.py --busy         # two tasks share the CPU, 3:1

Then:  probing -t PID backtrace --tasks;  probing -t PID diagnose hang;
       probing -t PID query "SELECT name, awaits, waited_s FROM python.tasks"
       probing -t PID flamegraph --tasks   (with --busy)
"""
import argparse
import asyncio
import time

STATE = {}


async def handle(reader, writer):
    # One request: its line, then the lock the cache holds.
    while True:
        line = await reader.readline()
        if not line:
            break
        async with STATE["cache_lock"]:
            writer.write(line.upper())
            await writer.drain()


async def client(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"hello\n")
    await writer.drain()
    await reader.readline()       # never answered: the lock is held
    writer.close()


async def refresh_cache():
    # Holds the lock across an await that does not end.
    async with STATE["cache_lock"]:
        await STATE["never"].wait()


async def worker(queue):
    while True:
        job = await queue.get()
        queue.task_done()
        del job


async def idle(event):
    await event.wait()


async def ping(other):
    await asyncio.sleep(0.2)
    await other["pong"]


async def pong(other):
    await asyncio.sleep(0.2)
    await other["ping"]


def crunch(n):
    # CPU work, in a plain function the coroutines call.
    total = 0
    for i in range(n):
        total += i * i
    return total


async def render(units):
    # Its CPU time spread over many steps, an await between each: no
    # single stack of the loop's thread shows that it is one task's.
    while True:
        for _ in range(units):
            crunch(20000)
        await asyncio.sleep(0)


async def score(units):
    while True:
        for _ in range(units):
            crunch(20000)
        await asyncio.sleep(0)


async def blocker():
    await asyncio.sleep(1.0)      # after READY (main's sleep ends first)
    time.sleep(3600)              # a blocking call in a coroutine


async def main(args):
    STATE["cache_lock"] = asyncio.Lock()
    STATE["never"] = asyncio.Event()
    cache = asyncio.create_task(refresh_cache(), name="cache-refresh")
    await asyncio.sleep(0)        # the cache holds its lock first
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    queue = asyncio.Queue()
    tasks = [asyncio.create_task(worker(queue), name="worker-%d" % i) for i in range(3)]
    tasks += [asyncio.create_task(idle(STATE["never"]), name="idle-%d" % i)
              for i in range(args.idle)]
    tasks.append(asyncio.create_task(client(port), name="client"))
    if args.deadlock:
        other = {}
        other["ping"] = asyncio.create_task(ping(other), name="ping")
        other["pong"] = asyncio.create_task(pong(other), name="pong")
        tasks += list(other.values())
    if args.block:
        tasks.append(asyncio.create_task(blocker(), name="blocker"))
    if args.busy:
        tasks.append(asyncio.create_task(render(3), name="render"))
        tasks.append(asyncio.create_task(score(1), name="score"))
    await asyncio.sleep(0.5)
    print("READY", flush=True)
    async with server:
        await asyncio.gather(cache, *tasks)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--deadlock", action="store_true")
    p.add_argument("--block", action="store_true")
    p.add_argument("--idle", type=int, default=0)
    p.add_argument("--busy", action="store_true")
    asyncio.run(main(p.parse_args()))
