# pyviews: how the debugger shows Python values (the variables view, hovers,
# completions, exception details).  Embedded in libprobing.so at build time
# (agent/python/pyviews.c) and run in a private module that is not in
# sys.modules: it imports nothing the target has not imported itself
# (torch and numpy are looked up in sys.modules, never imported).
#
# Contract with variables.c: every function takes plain objects and returns
# plain tuples; any exception is caught by the caller.  Nothing here
# materialises a large container: children come in pages (start, count),
# tensor statistics are computed only when expanded, on at most
# STATS_LIMIT elements.
import sys

PAGE_MAX = 1000            # children in one page when the client asks for all
STATS_LIMIT = 1 << 24      # elements a tensor's statistics look at
NAME_MAX = 120             # chars of a dict key shown as a name

_SCALARS = (int, float, complex, bool, str, bytes, bytearray, type(None))
_SEQUENCES = (list, tuple, range)
_SETS = (set, frozenset)


class Lazy:
    """A child computed only when expanded: statistics or the values of a
    tensor or array."""
    __slots__ = ("what", "obj", "text", "count")

    def __init__(self, what, obj, text, count=0):
        self.what = what
        self.obj = obj
        self.text = text
        self.count = count

    def __repr__(self):
        return self.text


def _torch_tensor(o):
    t = sys.modules.get("torch")
    T = getattr(t, "Tensor", None) if t is not None else None
    return T is not None and isinstance(o, T)


def _torch_module(o):
    nn = sys.modules.get("torch.nn")
    M = getattr(nn, "Module", None) if nn is not None else None
    return M is not None and isinstance(o, M)


def _ndarray(o):
    n = sys.modules.get("numpy")
    A = getattr(n, "ndarray", None) if n is not None else None
    return A is not None and isinstance(o, A)


def kind(o):
    if type(o) is Lazy:
        return "lazy"
    if isinstance(o, _SCALARS):
        return "scalar"
    if _torch_tensor(o):
        return "tensor"
    if _torch_module(o):
        return "module"
    if _ndarray(o):
        return "ndarray"
    if isinstance(o, dict):
        return "dict"
    if isinstance(o, _SEQUENCES):
        return "sequence"
    if isinstance(o, _SETS):
        return "set"
    return "object"


def _human(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0


def _dtype(t):
    return str(t.dtype).replace("torch.", "")


def _scalar_value(t):
    """The value of a 0-d tensor (one element: cheap), or None."""
    try:
        return t.item() if t.dim() == 0 and t.device.type != "meta" else None
    except Exception:
        return None


def _tensor_text(t):
    v = _scalar_value(t)
    return "%s(shape=%s, dtype=%s, device=%s%s)" % (
        type(t).__name__, list(t.shape), _dtype(t), t.device,
        "" if v is None else ", value=%r" % (v,))


def _grad_readable(t):
    """.grad of a non-leaf tensor makes torch warn into the program's
    stderr (it is None unless retain_grad() was called): read only where
    it can be set."""
    return bool(t.is_leaf) or bool(getattr(t, "retains_grad", False))


def _module_params(m):
    n = size = 0
    for p in m.parameters():
        n += p.numel()
        size += p.numel() * p.element_size()
    return n, size


def _module_text(m):
    n, size = _module_params(m)
    return "%s(parameters=%s, size=%s)" % (type(m).__name__, format(n, ","), _human(size))


def _array_text(a):
    return "ndarray(shape=%s, dtype=%s)" % (list(a.shape), a.dtype)


def _attrs(o):
    """(name, value) of an object's instance attributes, without running
    properties: __dict__ and __slots__."""
    out = []
    d = getattr(o, "__dict__", None)
    if isinstance(d, dict) or type(d).__name__ == "mappingproxy":
        out.extend(d.items())
    seen = set(k for k, _ in out)
    for cls in type(o).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        for s in slots:
            if s in seen or s in ("__dict__", "__weakref__"):
                continue
            seen.add(s)
            try:
                out.append((s, object.__getattribute__(o, s)))
            except Exception:
                pass
    return out


def describe(o):
    """(text or None for repr, expandable, named count, indexed count)."""
    k = kind(o)
    if k == "lazy":
        return (o.text, True, 0, o.count)
    if k == "scalar":
        return (None, False, 0, 0)
    if k == "tensor":
        return (_tensor_text(o), True, 0, 0)
    if k == "module":
        return (_module_text(o), True, 0, 0)
    if k == "ndarray":
        return (_array_text(o), True, 0, 0)
    if k in ("dict", "sequence", "set"):
        n = len(o)
        return (None, n > 0, 0, n)
    return (None, len(_attrs(o)) > 0, 0, 0)


def _key_name(k):
    r = repr(k)
    return r if len(r) <= NAME_MAX else r[:NAME_MAX - 3] + "..."


def _page(items, start, count):
    end = start + (count if count > 0 else PAGE_MAX)
    out = []
    for i, it in enumerate(items):
        if i < start:
            continue
        if i >= end:
            break
        out.append(it)
    return out


def _sub(prefix, fmt, *a):
    return None if prefix is None else fmt % ((prefix,) + a)


def _tensor_children(t, prefix):
    out = [
        ("shape", list(t.shape), _sub(prefix, "%s.shape")),
        ("dtype", Lazy("text", None, _dtype(t)), _sub(prefix, "%s.dtype")),
        ("device", Lazy("text", None, str(t.device)), _sub(prefix, "%s.device")),
        ("requires_grad", bool(t.requires_grad), _sub(prefix, "%s.requires_grad")),
    ]
    if _grad_readable(t):
        out.append(("grad", t.grad, _sub(prefix, "%s.grad")))
    else:
        out.append(("grad_fn", Lazy("text", None, type(t.grad_fn).__name__),
                    _sub(prefix, "%s.grad_fn")))
    out += [
        ("is_leaf", bool(t.is_leaf), _sub(prefix, "%s.is_leaf")),
        ("numel", t.numel(), _sub(prefix, "%s.numel()")),
    ]
    v = _scalar_value(t)
    if v is not None:
        out.insert(0, ("value", v, _sub(prefix, "%s.item()")))
    if t.numel() > 0 and not t.is_complex():
        out.append(("[statistics]", Lazy("tstats", t, "min, max, mean, std, NaN and Inf counts"), None))
    if t.dim() > 0:
        out.append(("[values]", Lazy("values", t, "%d along dim 0" % t.shape[0], t.shape[0]), prefix))
    return out


def _stats_sample(x, numel):
    """At most STATS_LIMIT elements of x (flattened), and a note when cut."""
    if numel <= STATS_LIMIT:
        return x.reshape(-1), ""
    rows = max(1, STATS_LIMIT // max(1, numel // x.shape[0]))
    s = x[:rows].reshape(-1)[:STATS_LIMIT]
    return s, " (of the first %s elements)" % format(len(s), ",")


def _tensor_stats(t):
    torch = sys.modules["torch"]
    with torch.no_grad():
        x, note = _stats_sample(t.detach(), t.numel())
        out = [("count", format(x.numel(), ",") + note)]
        if x.dtype == torch.bool:
            out.append(("true", int(x.sum().item())))
            return out
        f = x if x.is_floating_point() else x.double()
        out.append(("min", x.min().item()))
        out.append(("max", x.max().item()))
        out.append(("mean", f.mean().item()))
        out.append(("std", f.std().item() if f.numel() > 1 else 0.0))
        if x.is_floating_point():
            out.append(("nan", int(torch.isnan(x).sum().item())))
            out.append(("inf", int(torch.isinf(x).sum().item())))
    return out


def _array_stats(a):
    np = sys.modules["numpy"]
    x = a.reshape(-1)
    note = ""
    if x.size > STATS_LIMIT:
        x = x[:STATS_LIMIT]
        note = " (of the first %s elements)" % format(STATS_LIMIT, ",")
    out = [("count", format(x.size, ",") + note)]
    if x.dtype == np.bool_:
        out.append(("true", int(x.sum())))
        return out
    if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
        return out
    out.append(("min", x.min().item()))
    out.append(("max", x.max().item()))
    f = x.astype(np.float64)
    out.append(("mean", float(f.mean())))
    out.append(("std", float(f.std())))
    if np.issubdtype(x.dtype, np.floating):
        out.append(("nan", int(np.isnan(x).sum())))
        out.append(("inf", int(np.isinf(x).sum())))
    return out


def _values_page(x, start, count, prefix):
    n = x.shape[0]
    end = min(n, start + (count if count > 0 else PAGE_MAX))
    if start >= end:
        return []
    if x.ndim == 1:
        vals = x[start:end].tolist()
        return [(str(start + i), v, _sub(prefix, "%s[%d]", start + i)) for i, v in enumerate(vals)]
    return [(str(i), x[i], _sub(prefix, "%s[%d]", i)) for i in range(start, end)]


def _module_children(m, prefix):
    n, size = _module_params(m)
    out = [("[parameters]", Lazy("text", None, "%s (%s)" % (format(n, ","), _human(size))), None),
           ("training", bool(m.training), _sub(prefix, "%s.training"))]
    for name, sub in m._modules.items():
        if sub is not None:
            out.append((name, sub, _sub(prefix, "%s.%s", name) if name.isidentifier() else None))
    for name, p in m._parameters.items():
        out.append((name, p, _sub(prefix, "%s.%s", name)))
    for name, b in m._buffers.items():
        out.append((name, b, _sub(prefix, "%s.%s", name)))
    return out


def _array_children(a, prefix):
    out = [("shape", list(a.shape), _sub(prefix, "%s.shape")),
           ("dtype", Lazy("text", None, str(a.dtype)), _sub(prefix, "%s.dtype")),
           ("size", int(a.size), _sub(prefix, "%s.size"))]
    if a.size > 0:
        out.append(("[statistics]", Lazy("astats", a, "min, max, mean, std, NaN and Inf counts"), None))
    if a.ndim > 0:
        out.append(("[values]", Lazy("values", a, "%d along axis 0" % a.shape[0], a.shape[0]), prefix))
    return out


def _dunder(name):
    return isinstance(name, str) and name.startswith("__") and name.endswith("__")


def children(o, mode, start, count, prefix):
    """A page of o's children: [(name, value, evaluateName or None)].
    mode: "scope" (a namespace dict, names are its keys), "globals" (the
    same without dunder names), or "" (by the value's kind)."""
    if mode in ("scope", "globals"):
        items = ((k, v, k if isinstance(k, str) and k.isidentifier() else None)
                 for k, v in o.items() if not (mode == "globals" and _dunder(k)))
        return _page(items, start, count)
    k = kind(o)
    if k == "lazy":
        if o.what == "tstats":
            return _page(((n, v, None) for n, v in _tensor_stats(o.obj)), start, count)
        if o.what == "astats":
            return _page(((n, v, None) for n, v in _array_stats(o.obj)), start, count)
        if o.what == "values":
            return _values_page(o.obj, start, count, prefix)
        return []
    if k == "tensor":
        return _page(_tensor_children(o, prefix), start, count)
    if k == "module":
        return _page(_module_children(o, prefix), start, count)
    if k == "ndarray":
        return _page(_array_children(o, prefix), start, count)
    if k == "dict":
        return _page(((_key_name(key), v, _sub(prefix, "%s[%r]", key)
                       if isinstance(key, (str, int, float, bool)) else None)
                      for key, v in o.items()), start, count)
    if k == "sequence":
        end = min(len(o), start + (count if count > 0 else PAGE_MAX))
        return [(str(i), o[i], _sub(prefix, "%s[%d]", i)) for i in range(start, end)]
    if k == "set":
        return _page(((str(i), v, None) for i, v in enumerate(o)), start, count)
    if k == "object":
        is_mod = type(o).__name__ == "module"
        return _page(((n, v, _sub(prefix, "%s.%s", n) if isinstance(n, str) and n.isidentifier() else None)
                      for n, v in _attrs(o) if not (is_mod and _dunder(n))), start, count)
    return []


def set_child(o, mode, name, value):
    """Sets the child called name (as children() named it) to value."""
    if mode in ("scope", "globals"):
        o[name] = value
        return
    k = kind(o)
    if k in ("lazy", "tensor", "module", "ndarray", "set", "scalar"):
        raise TypeError("%s children cannot be set here; evaluate an assignment instead" % k)
    if k == "dict":
        for key in o:
            if _key_name(key) == name:
                o[key] = value
                return
        raise KeyError(name)
    if k == "sequence":
        o[int(name)] = value
        return
    setattr(o, name, value)


_KEYWORDS = ("False", "None", "True", "and", "as", "assert", "async", "await",
             "break", "class", "continue", "def", "del", "elif", "else",
             "except", "finally", "for", "from", "global", "if", "import",
             "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
             "return", "try", "while", "with", "yield")


def complete(text, g, l, limit=200):
    """Completions of the dotted name text ends with: (token start, [names])."""
    i = len(text)
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "._"):
        i -= 1
    token = text[i:]
    if "." in token:
        base, _, part = token.rpartition(".")
        names = base.split(".")
        if not all(n.isidentifier() for n in names):
            return (i, [])
        if names[0] in l:
            obj = l[names[0]]
        elif names[0] in g:
            obj = g[names[0]]
        else:
            b = g.get("__builtins__")
            b = b if isinstance(b, dict) else getattr(b, "__dict__", {})
            if names[0] not in b:
                return (i, [])
            obj = b[names[0]]
        for n in names[1:]:
            obj = getattr(obj, n)
        cands = [base + "." + a for a in dir(obj) if a.startswith(part)
                 and (part.startswith("_") or not a.startswith("_"))]
    else:
        b = g.get("__builtins__")
        b = b if isinstance(b, dict) else getattr(b, "__dict__", {})
        seen = set()
        cands = []
        for src in (l, g, b, _KEYWORDS):
            for n in src:
                if isinstance(n, str) and n.startswith(token) and n not in seen \
                        and (token.startswith("_") or not n.startswith("_")):
                    seen.add(n)
                    cands.append(n)
    cands.sort()
    return (i, cands[:limit])


def exception_info(e):
    """(exceptionId, description, fullTypeName, formatted traceback)."""
    t = type(e)
    full = t.__qualname__ if t.__module__ == "builtins" else t.__module__ + "." + t.__qualname__
    tb = sys.modules.get("traceback")
    # Three arguments: the one-argument form is 3.10's.
    text = "".join(tb.format_exception(t, e, e.__traceback__)) if tb is not None else ""
    return (t.__qualname__, str(e), full, text)


# ---- breakpoints in code torch.compile runs compiled ----------------------

CODES_MAX = 20000          # code objects of one file looked at
FRAMES_MAX = 1024          # running frames whose locals are looked at


def _cache_entries():
    """torch's own `_debug_get_cache_entry_list(code)`: the graphs dynamo
    compiled for a code object; None where torch has none of it."""
    t = sys.modules.get("torch")
    for holder in (getattr(getattr(getattr(t, "_C", None), "_dynamo", None),
                           "eval_frame", None),
                   sys.modules.get("torch._dynamo.eval_frame")):
        fn = getattr(holder, "_debug_get_cache_entry_list", None)
        if fn is not None:
            return fn
    return None


def _compiled_classes():
    """The classes of the modules inside a torch.compile'd module
    (OptimizedModule) that the program holds in a module's globals or in a
    running function's locals: dynamo inlines their methods into its
    graphs, and the only code it keeps compiled graphs for is torch's own
    Module.__call__."""
    ef = sys.modules.get("torch._dynamo.eval_frame")
    om = getattr(ef, "OptimizedModule", None)
    if not isinstance(om, type):
        return set()
    module = type(sys)
    spaces = [m.__dict__ for m in list(sys.modules.values())
              if type(m) is module]
    # f_locals makes a dict each frame keeps (up to 3.12): a bounded
    # number of frames in all, not 64 of each of thousands of threads.
    frames = 0
    for f in list(sys._current_frames().values()):
        for _ in range(64):
            if f is None or frames >= FRAMES_MAX:
                break
            spaces.append(f.f_locals)
            frames += 1
            f = f.f_back
    found, classes = [], set()
    for ns in spaces:
        try:
            found.extend(v for v in list(ns.values()) if isinstance(v, om))
        except Exception:
            pass
    for wrapper in found[:64]:
        todo = [wrapper.__dict__.get("_modules", {}).get("_orig_mod")]
        while todo and len(classes) < 4096:
            m = todo.pop()
            if m is None or type(m) in classes:
                continue
            classes.add(type(m))
            subs = m.__dict__.get("_modules")
            if type(subs) is dict:
                todo.extend(subs.values())
    return classes


def _codes_of(path, classes):
    """(code, name, compiled class or None) of the module whose file is
    path: its functions, its classes' methods (one level), and the code
    nested in them.  Read from the namespaces' dicts: no attribute hook of
    the program runs."""
    module, function = type(sys), type(_codes_of)
    out, todo = [], []
    for mod in list(sys.modules.values()):
        if type(mod) is not module or mod.__dict__.get("__file__") != path:
            continue
        for v in list(mod.__dict__.values()):
            cls = v if isinstance(v, type) else None
            items = list(v.__dict__.values()) if cls else [v]
            for f in items:
                if type(f) in (staticmethod, classmethod):
                    f = f.__func__
                if type(f) is function and f.__code__.co_filename == path:
                    inlined = cls is not None and cls in classes
                    todo.append((f.__code__, inlined))
    seen = set()
    while todo and len(out) < CODES_MAX:
        co, inlined = todo.pop()
        if id(co) in seen:
            continue
        seen.add(id(co))
        out.append((co, inlined))
        todo.extend((c, inlined) for c in co.co_consts
                    if type(c) is type(co))
    return out


def compiled_lines(path, lines):
    """((line, function name), ...): the lines of path inside a function
    that torch.compile runs compiled — one dynamo holds graphs for, or a
    method of a module inside a compiled module (inlined into its graphs):
    they do not run as Python there, and a breakpoint on them cannot stop.
    Empty when torch._dynamo is not loaded."""
    if "torch._dynamo" not in sys.modules:
        return ()
    entries = _cache_entries()
    classes = _compiled_classes()
    spans = []
    for co, inlined in _codes_of(path, classes):
        try:
            ls = [l for _, _, l in co.co_lines() if l]
        except AttributeError:          # 3.9: no co_lines
            return ()
        if not ls:
            continue
        compiled = inlined
        if not compiled and entries is not None:
            try:
                compiled = len(entries(co)) > 0
            except Exception:
                compiled = False
        spans.append((min(ls), max(ls), compiled,
                      getattr(co, "co_qualname", co.co_name)))
    out = []
    for line in lines:
        inner = None    # the innermost compiled function around the line
        for lo, hi, compiled, name in spans:
            if compiled and lo <= line <= hi and (inner is None or
                                                  lo >= inner[0]):
                inner = (lo, name)
        if inner is not None:
            out.append((line, inner[1]))
    return tuple(out)
