# Python threads that call, return, raise, yield, and start and end threads
# all the time, for test_stress.c to walk under.
import threading

stop = threading.Event()


def rec(n):
    if n == 0:
        data = [i for i in range(50)]
        return sum(data)
    return rec(n - 1) + 1


def gen():
    for i in range(100):
        yield i


def churn():
    while not stop.is_set():
        rec(30)
        sum(gen())
        try:
            raise ValueError("x")
        except ValueError:
            pass


def spawner():
    while not stop.is_set():
        t = threading.Thread(target=rec, args=(5,))
        t.start()
        t.join()


workers = [threading.Thread(target=churn, name="churn%d" % i)
           for i in range(3)]
workers.append(threading.Thread(target=spawner, name="spawner"))
for w in workers:
    w.start()
