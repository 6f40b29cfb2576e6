"""A program that hangs, to find with Probing.

    PROBING=1 python3 examples/hang.py
    probing -t PID backtrace                # who waits for what
    probing -t PID query "SELECT thread_name, func, lineno FROM python.backtrace WHERE depth = 0"

A producer thread reads "jobs" and puts them on a queue; a consumer
thread takes them off and processes them until it gets the None that
marks the end; the main thread waits for the consumer.  The bug: the
producer returns early on an empty job without putting the None, so the
consumer waits on the queue forever, and the main thread with it.  Both
sit in blocking calls that use no CPU: nothing is printed, nothing
fails.  docs/torch.md walks through finding it.
"""
import queue
import threading
import time

JOBS = ["resize", "crop", "", "rotate"]  # the empty one ends the producer


def producer(q):
    for job in JOBS:
        if not job:
            return  # the bug: should put None before leaving
        q.put(job)
        time.sleep(0.05)
    q.put(None)


def consumer(q, done):
    while True:
        job = q.get()
        if job is None:
            break
        done.append(job.upper())


def main():
    q = queue.Queue()
    done = []
    threads = [threading.Thread(target=producer, args=(q,), name="producer"),
               threading.Thread(target=consumer, args=(q, done),
                                name="consumer")]
    for t in threads:
        t.start()
    print("waiting for the workers...", flush=True)
    for t in threads:
        t.join()
    print("done:", done, flush=True)


if __name__ == "__main__":
    main()
