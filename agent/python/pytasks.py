# pytasks: every asyncio task of every event loop, for python.tasks,
# `backtrace --tasks`, `diagnose hang` and the editor's task entries.
# Embedded in libprobing.so at build time (agent/python/pytasks.c) and run
# in a private module that is not in sys.modules.  It imports nothing:
# asyncio is looked up in sys.modules (a program that never imported it
# has no tasks).
#
# Read with the GIL through asyncio's own API, on every version: the
# loops are found in the threads' stacks (the `self` of a running
# BaseEventLoop.run_forever); their tasks are asyncio's registries before
# 3.14 and asyncio.all_tasks(loop) from 3.14 (the interpreter's per-thread
# task lists); the running one is asyncio.current_task(loop).
#
# The program's code does not run here: no repr, no str() of its objects;
# a task's and a future's methods are asyncio's own, called unbound (a
# Task subclass's overrides of get_coro, done, get_name, _fut_waiter do
# not run); a chain is followed through coroutines, generators and async
# generators only (exact types); a name is used only when it is a str.
# What remains: from 3.14, all_tasks(loop) — CPython's, the only way to
# its per-thread task lists — calls each task's done() itself.
#
# The listing is Python code run by the agent's thread: the interpreter's
# switch interval hands the GIL to the loop's thread every 5 ms while it
# runs, so listing 10,000 tasks never stops a loop for longer than that
# (tests/bench/asyncio_tasks.py).  Each task is read whole between two
# bytecodes of its own; the list is the tasks of the moment it was taken.
#
# Few objects the cyclic GC tracks are made: the answer is one flat list
# of strings and numbers, the bookkeeping dicts of numbers.  (10,000 rows
# as tuples made a full collection run in the middle of the listing: a
# 47 ms stop of every thread.)
#
# Contract with pytasks.c: snapshot() returns (flat list, tasks in it,
# tasks left out, note), roots() (flat, tasks left out); see there.  Any
# exception is caught by the caller.
import sys

# What the agent saw each task wait on, and since when (monotonic
# seconds): id(task) -> id(awaited), id(task) -> since.  Pruned to the
# tasks of the last snapshot.
_seen_what = {}
_seen_since = {}
# id(code) -> "Class.method" for asyncio's own classes, for 3.9/3.10,
# whose code objects have no co_qualname (built once).
_qualnames = None


def _loops(aio):
    """(loops, thread idents) of every loop running in a thread now."""
    bases = tuple(b for b in (
        getattr(getattr(aio, "base_events", None), "BaseEventLoop", None),
        getattr(aio, "AbstractEventLoop", None)) if isinstance(b, type))
    loops, idents, ids = [], [], set()
    for ident, frame in sys._current_frames().items():
        f = frame
        while f is not None:
            if f.f_code.co_name in ("run_forever", "_run_once"):
                try:
                    loop = f.f_locals.get("self")
                except Exception:
                    loop = None
                if (loop is not None and id(loop) not in ids and
                        issubclass(type(loop), bases)):
                    ids.add(id(loop))
                    loops.append(loop)
                    idents.append(ident)
                    break
            f = f.f_back
    return loops, idents


class _Api:
    """asyncio's own classes and methods, to be called unbound."""

    def __init__(self, aio):
        tasks = getattr(aio, "tasks", None)
        futures = getattr(aio, "futures", None)
        self.task_types = tuple(t for t in (
            getattr(tasks, "_CTask", None), getattr(tasks, "_PyTask", None),
            getattr(aio, "Task", None)) if isinstance(t, type))
        self.future_types = tuple(t for t in (
            getattr(futures, "_CFuture", None), getattr(futures, "_PyFuture", None),
            getattr(aio, "Future", None)) if isinstance(t, type))
        self.gathering = getattr(tasks, "_GatheringFuture", None)
        types = sys.modules.get("types")
        self.chain_types = tuple(t for t in (
            getattr(types, "CoroutineType", None), getattr(types, "GeneratorType", None),
            getattr(types, "AsyncGeneratorType", None)) if isinstance(t, type))
        self.pkg = (getattr(aio, "__file__", "") or "").rsplit("/", 1)[0] + "/"

    def task_base(self, t):
        """The asyncio class whose methods t's are, or None."""
        for b in self.task_types:
            if issubclass(type(t), b):
                return b
        return None

    def future_base(self, f):
        for b in self.future_types:
            if issubclass(type(f), b):
                return b
        return None

    def waiter(self, t, base):
        """The future t waits on (Task._fut_waiter, asyncio's own)."""
        d = base.__dict__.get("_fut_waiter")
        if d is not None and hasattr(type(d), "__get__"):
            return d.__get__(t, base)
        try:   # the pure-Python task: an instance attribute
            return object.__getattribute__(t, "_fut_waiter")
        except Exception:
            return None


def _asyncio_qualnames(aio):
    global _qualnames
    if _qualnames is None:
        names = {}
        for modname in ("locks", "queues", "streams", "tasks", "futures",
                        "base_events", "timeouts", "taskgroups"):
            mod = getattr(aio, modname, None)
            for cname, cls in list(getattr(mod, "__dict__", {}).items()):
                if not isinstance(cls, type):
                    continue
                for fname, fn in list(cls.__dict__.items()):
                    code = getattr(fn, "__code__", None)
                    if code is not None:
                        names[id(code)] = "%s.%s" % (cname, fname)
        _qualnames = names
    return _qualnames


def _func(code, aio):
    name = getattr(code, "co_qualname", None)
    if name is None:
        name = _asyncio_qualnames(aio).get(id(code), code.co_name)
    return name


def _chain(api, coro, depth_max):
    """The coroutine's frames, innermost first (coroutines, generators and
    async generators only: nothing else is asked for its frame)."""
    frames = []
    obj = coro
    for _ in range(depth_max):
        kind = type(obj)
        if kind not in api.chain_types:
            break
        if hasattr(obj, "cr_frame"):
            frame, nxt = obj.cr_frame, obj.cr_await
        elif hasattr(obj, "gi_frame"):
            frame, nxt = obj.gi_frame, obj.gi_yieldfrom
        else:
            frame, nxt = obj.ag_frame, obj.ag_await
        if frame is None:
            break
        frames.append(frame)
        if nxt is None:
            break
        obj = nxt
    frames.reverse()
    return frames


def _done(api, f):
    base = api.future_base(f)
    try:
        return base is not None and base.done(f)
    except Exception:
        return False


def _awaits(api, aio, frames, waiter, ids_of_tasks, names):
    """(what it waits for in words, ids of the tasks it awaits)."""
    if waiter is not None:
        if id(waiter) in ids_of_tasks:
            return "task %s" % names.get(id(waiter), "?"), [id(waiter)]
        if api.gathering is not None and type(waiter) is api.gathering:
            # (asyncio's own class, exactly: its attribute is plain)
            children = getattr(waiter, "_children", None)
            if type(children) is list:
                ids = [id(c) for c in children if id(c) in ids_of_tasks]
                pending = sum(1 for c in children if not _done(api, c))
                return "gather of %d (%d pending)" % (len(children), pending), ids
    # Of the innermost frames in asyncio, the outermost public one names
    # what: Lock.acquire (not the mixin's __aenter__ around it),
    # StreamReader.readline (not _wait_for_data), Queue.get, sleep.
    inner = None
    for frame in frames:
        code = frame.f_code
        if not code.co_filename.startswith(api.pkg):
            break
        if inner is None or not code.co_name.startswith("_"):
            inner = code
    if inner is not None:
        return "asyncio %s" % _func(inner, aio), []
    if waiter is not None:
        return type(waiter).__name__, []
    return "", []


def _name(t, base):
    try:
        name = base.get_name(t)
        if type(name) is str:
            return name
    except Exception:
        pass
    return "%s-%x" % (type(t).__name__, id(t))


def _state(t, base, current):
    if t is current:
        return "running"
    try:
        if base.done(t):
            return "cancelled" if base.cancelled(t) else "done"
        cancelling = getattr(base, "cancelling", None)
        if cancelling is not None and cancelling(t):
            return "cancelling"
    except Exception:
        pass
    return "pending"


def _loop_tasks(aio, api, loop):
    """The tasks of loop not done yet."""
    if sys.version_info >= (3, 14):
        return list(aio.all_tasks(loop))
    tasks = getattr(aio, "tasks", None)
    every = []
    for reg in ("_all_tasks", "_scheduled_tasks", "_eager_tasks"):
        r = getattr(tasks, reg, None)
        if r is not None:
            every.extend(list(r))
    out, seen = [], set()
    for t in every:
        base = api.task_base(t)
        if base is None or id(t) in seen:
            continue
        seen.add(id(t))
        try:
            if base.get_loop(t) is loop and not base.done(t):
                out.append(t)
        except Exception:
            pass
    return out


def _current(aio, loop):
    try:
        return aio.current_task(loop)
    except Exception:
        return None


FLAT_MAX = 2000000   # items of snapshot()'s answer, at most (memory)


def _tasks(aio, api, max_tasks):
    """(loops, idents, tasks, their loop's index, each loop's running
    task, tasks left out past max_tasks)."""
    loops, idents = _loops(aio)
    tasks, owners, currents, left = [], [], [], 0
    for k in range(len(loops)):
        try:
            some = _loop_tasks(aio, api, loops[k])
        except Exception:
            some = []
        currents.append(_current(aio, loops[k]))
        room = max(0, max_tasks - len(tasks))
        left += max(0, len(some) - room)
        tasks.extend(some[:room])
        owners.extend([k] * min(room, len(some)))
    return loops, idents, tasks, owners, currents, left


def _read(api, aio, t, current, ids_of_tasks, names, max_depth):
    """(chain, waiter, what it awaits, ids it awaits, state, coroutine
    name) of task t, or None when it is no asyncio task."""
    base = api.task_base(t)
    if base is None:
        return None
    coro = base.get_coro(t)
    chain = _chain(api, coro, max_depth)
    waiter = api.waiter(t, base)
    what, ids = _awaits(api, aio, chain, waiter, ids_of_tasks, names)
    state = _state(t, base, current)
    cname = coro.__qualname__ if type(coro) in api.chain_types else type(coro).__name__
    return chain, waiter, what, ids, state, cname


def _names(api, tasks):
    out = {}
    for t in tasks:
        base = api.task_base(t)
        if base is not None:
            out[id(t)] = _name(t, base)
    return out


def snapshot(max_tasks, max_depth, now):
    """(flat, n, left out, note): flat holds n tasks one after the other,
    each as: id, name, state, id of its loop, its loop's thread ident,
    coroutine name, what it awaits in words, seconds seen waiting (-1.0:
    not waiting), frame count F, F times (func, file, line) innermost
    first, count K of the tasks it awaits, their K ids.  A tuple, which
    nothing can change while pytasks.c reads it."""
    global _seen_what, _seen_since
    aio = sys.modules.get("asyncio")
    if aio is None:
        return (), 0, 0, "asyncio is not imported"
    api = _Api(aio)
    loops, idents, tasks, owners, currents, left = _tasks(aio, api, max_tasks)
    if not loops:
        return (), 0, 0, "no event loop runs"
    ids_of_tasks = set(id(t) for t in tasks)
    names = _names(api, tasks)
    old_what, old_since = _seen_what, _seen_since
    seen_what, seen_since = {}, {}
    flat = []
    n = 0
    for i in range(len(tasks)):
        t = tasks[i]
        k = owners[i]
        if len(flat) > FLAT_MAX:
            left += len(tasks) - i
            break
        try:
            r = _read(api, aio, t, currents[k], ids_of_tasks, names, max_depth)
            if r is None:
                continue
            chain, waiter, what, ids, state, cname = r
            waited = -1.0
            if state == "pending" and waiter is not None:
                tid = id(t)
                since = now
                if old_what.get(tid) == id(waiter):
                    since = old_since.get(tid, now)
                seen_what[tid] = id(waiter)
                seen_since[tid] = since
                waited = now - since
            one = [id(t), names.get(id(t), "?"), state, id(loops[k]), idents[k],
                   cname, what, waited, len(chain)]
            for f in chain:
                code = f.f_code
                one.extend((_func(code, aio), code.co_filename,
                            f.f_lineno or code.co_firstlineno))
            one.append(len(ids))
            one.extend(ids)
            flat.extend(one)
            n += 1
        except Exception:
            continue
    _seen_what, _seen_since = seen_what, seen_since
    return tuple(flat), n, left, ""


def roots(max_tasks):
    """For the sampler's attribution of its samples to tasks: (flat, left
    out), flat holding each task as its name, its coroutine, the
    coroutine's code object, its loop's thread ident and the task.  A
    tuple.  No frame object is asked for (from 3.11 that would make one
    for every coroutine, kept while it lives).  Past max_tasks, the tasks
    that wait on no future (ready to run: where the CPU time goes) come
    first."""
    aio = sys.modules.get("asyncio")
    if aio is None:
        return (), 0
    api = _Api(aio)
    loops, idents, tasks, owners, _currents, left = _tasks(aio, api, 1 << 30)
    order = range(len(tasks))
    if len(tasks) > max_tasks:
        waiting = []
        for t in tasks:
            base = api.task_base(t)
            try:
                waiting.append(base is None or api.waiter(t, base) is not None)
            except Exception:
                waiting.append(True)
        order = sorted(order, key=waiting.__getitem__)[:max_tasks]
        left = len(tasks) - max_tasks
    flat = []
    for i in order:
        t = tasks[i]
        try:
            base = api.task_base(t)
            if base is None:
                continue
            coro = base.get_coro(t)
            kind = type(coro)
            if kind not in api.chain_types:
                continue
            if hasattr(coro, "cr_code"):
                code = coro.cr_code
            elif hasattr(coro, "gi_code"):
                code = coro.gi_code
            else:
                code = coro.ag_code
            flat.extend((_name(t, base), coro, code, idents[owners[i]], t))
        except Exception:
            continue
    return tuple(flat), left


def debug_view(max_tasks, max_depth):
    """For the editor, at a stop: [(id, label, loop's thread ident,
    [frame objects, innermost first])] of at most max_tasks tasks, by
    name."""
    aio = sys.modules.get("asyncio")
    if aio is None:
        return []
    api = _Api(aio)
    loops, idents, tasks, owners, currents, _left = _tasks(aio, api, 1 << 30)
    ids_of_tasks = set(id(t) for t in tasks)
    names = _names(api, tasks)
    order = sorted(range(len(tasks)), key=lambda i: (owners[i], names.get(id(tasks[i]), "")))
    out = []
    for i in order:
        if len(out) >= max_tasks:
            break
        t = tasks[i]
        k = owners[i]
        try:
            r = _read(api, aio, t, currents[k], ids_of_tasks, names, max_depth)
            if r is None:
                continue
            chain, _waiter, what, _ids, _state_, cname = r
            label = "task %s (%s)%s" % (names.get(id(t), "?"), cname,
                                        ": awaits " + what if what else "")
            out.append((id(t), label, idents[k], chain))
        except Exception:
            continue
    return out
