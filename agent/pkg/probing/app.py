"""The program's own rows: tables it appends to and markers it sets, kept
by the agent in the schema ``app`` and read with SQL like its own tables
(recorded with them when ``data.dir`` is set; docs/python-api.md)::

    import probing

    @probing.table
    class Batch:                  # made a dataclass when it is not one
        step: int
        loss: float
        tokens: int

    Batch.append(step=1, loss=0.25, tokens=4096)   # a row of app.batch

    for batch in loader:
        with probing.step():                       # a row of app.steps
            with probing.span("forward"):          # a row of app.spans
                ...

    probing.query("SELECT step, loss FROM app.batch")

An append never waits for the agent: the row goes into a bounded queue
that the agent empties every 100 ms (and before each query); a full queue
drops the row and counts it (``stats()``).  A row is at most 2 KiB: a
longer str or bytes value is cut (at a character boundary) and counted.
Where the agent is not loaded (a free-threaded CPython without the GIL),
tables and markers do nothing.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
import types
import typing
from typing import Any, Callable, Dict, Optional, TypeVar

T = TypeVar("T")

__all__ = ["table", "span", "step", "stats"]

_SPANS, _STEPS = 0, 1  # the agent's ids of app.spans and app.steps

_TYPES = {int: "INTEGER", bool: "INTEGER", float: "REAL", str: "TEXT",
          bytes: "BLOB"}
_UNIONS = (typing.Union, getattr(types, "UnionType", typing.Union))
_TYPE_NAMES = {"int": "INTEGER", "bool": "INTEGER", "float": "REAL",
               "str": "TEXT", "bytes": "BLOB"}


def _native():
    from . import _native as native
    return native


def _rank():
    try:
        return int(os.environ["RANK"])
    except (KeyError, ValueError):
        return None


def _column_type(annotation):
    """INTEGER, REAL, TEXT, BLOB for int/bool, float, str, bytes (or an
    Optional of one); "" (any of them) for anything else."""
    if isinstance(annotation, str):  # from __future__ import annotations
        text = annotation.replace("typing.", "").replace(" ", "")
        m = re.fullmatch(r"Optional\[(\w+)\]|(\w+)\|None|None\|(\w+)", text)
        return _TYPE_NAMES.get(next(filter(None, m.groups())) if m else text,
                               "")
    if typing.get_origin(annotation) in _UNIONS:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _TYPES.get(args[0], "")
    return _TYPES.get(annotation, "")


def _convert(value, column_type):
    """A value as the agent takes it: numbers of other kinds (numpy's,
    a one-element tensor) as int or float where the column says so."""
    if value is None or type(value) in (int, float, str, bytes):
        return value
    if column_type == "INTEGER" or isinstance(value, bool):
        return value.__index__() if hasattr(value, "__index__") else value
    if column_type == "REAL" and hasattr(value, "__float__"):
        return float(value)
    return value


def _table_name(cls):
    # TrainStats -> train_stats
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", cls.__name__).lower()


def table(cls: Optional[type] = None, *, name: Optional[str] = None) -> Any:
    """Class decorator: the class's fields become the columns of
    ``app.<name>`` (name: the class's, TrainStats -> train_stats), and
    ``Cls.append(...)`` makes an instance (or takes one) and adds it as a
    row.  A class that is not a dataclass is made one.  Column types come
    from the annotations (int and bool INTEGER, float REAL, str TEXT,
    bytes BLOB, others any of these); a column ``ts`` (Unix seconds of
    the append) is added unless a field has that name.  Defining a name
    again with other columns raises ValueError.
    """
    def wrap(cls):
        if not dataclasses.is_dataclass(cls):
            cls = dataclasses.dataclass(cls)
        fields = dataclasses.fields(cls)
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # a forward reference it cannot resolve
            hints = {}
        columns = [(f.name, _column_type(hints.get(f.name, f.type)))
                   for f in fields]
        stamp = "ts" not in [f.name for f in fields]
        if stamp:
            columns.append(("ts", "REAL"))
        table_name = name or _table_name(cls)
        native = _native()
        doc = (cls.__doc__ or "").strip().splitlines()
        doc = doc[0] if doc and not doc[0].startswith(cls.__name__ + "(") \
            else "the program's %s rows (@probing.table)" % cls.__name__
        ident = native._app_define(table_name, tuple(columns), doc) \
            if native else None
        names = [f.name for f in fields]
        types = [t for _, t in columns]

        def append(kind, *args, **kwargs):
            """Adds a row: ``append(obj)`` with an instance, or the
            instance's arguments; returns the instance."""
            if len(args) == 1 and not kwargs and isinstance(args[0], kind):
                obj = args[0]
            else:
                obj = kind(*args, **kwargs)
            if ident is not None:
                row = tuple(_convert(getattr(obj, n), t)
                            for n, t in zip(names, types))
                native._app_append(ident, row + (time.time(),)
                                   if stamp else row)
            return obj

        cls.append = classmethod(append)
        cls.__probing_table__ = "app." + table_name
        return cls

    return wrap(cls) if cls is not None else wrap


_local = threading.local()


def _spans_open():
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


class span:
    """``with probing.span("load"):`` (or ``@probing.span("load")`` on a
    function) adds a row to app.spans when the block ends: its start and
    end (Unix seconds), duration (seconds), name, depth (spans open
    around it in its thread), the step it is in, its thread and rank.
    Nested spans nest; an exception in the block ends it as well."""

    def __init__(self, name: str) -> None:
        self.name = str(name)

    def __enter__(self) -> span:
        _spans_open().append((time.time(), time.perf_counter()))
        return self

    def __exit__(self, *exc: Any) -> bool:
        stack = _spans_open()
        if not stack:
            return False
        t0, p0 = stack.pop()
        took = time.perf_counter() - p0
        native = _native()
        if native:
            try:
                native._app_append(_SPANS, (
                    t0, t0 + took, took, self.name, len(stack),
                    _steps.number if _steps.open else None,
                    threading.get_native_id(), _rank()))
            except Exception:  # a marker never stops the program
                pass
        return False

    def __call__(self, fn: Callable[..., T]) -> Callable[..., T]:
        import functools

        @functools.wraps(fn)
        def spanned(*args, **kwargs):
            with span(self.name):
                return fn(*args, **kwargs)
        return spanned


class _Steps:
    """The process's steps: the one open, if any."""

    def __init__(self):
        self.lock = threading.Lock()
        self.number = 0
        self.open = False
        self.t0 = self.p0 = 0.0

    def close(self, p):
        # With the lock held.
        if not self.open:
            return
        self.open = False
        took = p - self.p0
        native = _native()
        if native:
            try:
                native._app_append(_STEPS, (
                    self.number, self.t0, self.t0 + took, took,
                    threading.get_native_id(), _rank()))
            except Exception:  # a marker never stops the program
                pass


_steps = _Steps()


class step:
    """Marks a step: ``probing.step()`` ends the step open (a row of
    app.steps: its number from 1, start, end, duration, thread, rank) and
    begins the next, so one call per iteration (at its start) records
    every iteration but the last; ``with probing.step():`` begins one and
    ends it with the block.  ``.number`` is the step begun."""

    number: int

    def __init__(self) -> None:
        now, p = time.time(), time.perf_counter()
        with _steps.lock:
            _steps.close(p)
            _steps.number += 1
            _steps.open = True
            _steps.t0, _steps.p0 = now, p
            self.number = _steps.number

    def __enter__(self) -> step:
        return self

    def __exit__(self, *exc: Any) -> bool:
        with _steps.lock:
            if _steps.open and _steps.number == self.number:
                _steps.close(time.perf_counter())
        return False


def stats() -> Dict[str, Any]:
    """Rows appended, dropped (the queue was full), cut (a long value),
    written into the tables, errors and the last one's text."""
    native = _native()
    return native._app_stats() if native else {}
