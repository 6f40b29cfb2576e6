/*
 * comm_wrap: recorded torch.distributed functions.  See comm_wrap.h.
 *
 * Everything here runs with the GIL, which also serialises the writers
 * of the comm_log.
 */
#include "comm_wrap.h"

#include "cpython/pycompat.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "comm_log.h"
#include "python/pymods.h"

#define ALWAYS 99 /* async: always (isend, irecv) */
#define DTYPES_MAX 32

/* Where a function's arguments are: positions (-1: none) and keywords. */
struct op_spec {
	const char *name;
	int8_t tensor; /* the tensor(s) this rank contributes */
	const char *tensor_kw;
	int8_t list;  /* ... a list of tensors */
	int8_t group; /* keyword "group" */
	int8_t async; /* keyword "async_op"; -1 never; ALWAYS */
	int8_t peer;  /* src, dst or root */
	const char *peer_kw;
	int8_t peer_def; /* the peer when not passed (-1: none) */
	int8_t p2p;	 /* send, recv, isend, irecv */
};

static const struct op_spec ops[] = {
	{"all_reduce", 0, "tensor", 0, 2, 3, -1, NULL, -1, 0},
	{"all_reduce_coalesced", 0, "tensors", 1, 2, 3, -1, NULL, -1, 0},
	{"broadcast", 0, "tensor", 0, 2, 3, 1, "src", -1, 0},
	{"reduce", 0, "tensor", 0, 3, 4, 1, "dst", -1, 0},
	{"all_gather", 1, "tensor", 0, 2, 3, -1, NULL, -1, 0},
	{"all_gather_coalesced", 1, "input_tensor_list", 1, 2, 3, -1, NULL, -1, 0},
	{"all_gather_into_tensor", 1, "input_tensor", 0, 2, 3, -1, NULL, -1, 0},
	{"_all_gather_base", 1, "input_tensor", 0, 2, 3, -1, NULL, -1, 0},
	{"reduce_scatter", 1, "input_list", 1, 3, 4, -1, NULL, -1, 0},
	{"reduce_scatter_tensor", 1, "input", 0, 3, 4, -1, NULL, -1, 0},
	{"_reduce_scatter_base", 1, "input", 0, 3, 4, -1, NULL, -1, 0},
	{"gather", 0, "tensor", 0, 3, 4, 2, "dst", 0, 0},
	{"scatter", 0, "tensor", 0, 3, 4, 2, "src", 0, 0},
	{"all_to_all", 1, "input_tensor_list", 1, 2, 3, -1, NULL, -1, 0},
	{"all_to_all_single", 1, "input", 0, 4, 5, -1, NULL, -1, 0},
	{"barrier", -1, NULL, 0, 0, 1, -1, NULL, -1, 0},
	{"monitored_barrier", -1, NULL, 0, 0, -1, -1, NULL, -1, 0},
	{"send", 0, "tensor", 0, 2, -1, 1, "dst", -1, 1},
	{"recv", 0, "tensor", 0, 2, -1, 1, "src", -1, 1},
	{"isend", 0, "tensor", 0, 2, ALWAYS, 1, "dst", -1, 1},
	{"irecv", 0, "tensor", 0, 2, ALWAYS, 1, "src", -1, 1},
	{"broadcast_object_list", -1, NULL, 0, 2, -1, 1, "src", 0, 0},
	{"all_gather_object", -1, NULL, 0, 2, -1, -1, NULL, -1, 0},
	{"gather_object", -1, NULL, 0, 3, -1, 2, "dst", 0, 0},
	{"scatter_object_list", -1, NULL, 0, 3, -1, 2, "src", 0, 0},
};
#define NOPS ((int)(sizeof(ops) / sizeof(ops[0])))

struct wrap {
	PyObject_HEAD vectorcallfunc vectorcall;
	PyObject *orig;
	int op;
};

struct dtype_info {
	PyObject *dtype; /* torch.float32 (strong; dtypes live forever) */
	int64_t size;
	char name[COMM_DTYPE_MAX];
};

/* The installation. */
static struct comm_log *log_;
static int on;
static PyObject *dist; /* torch.distributed */
static PyObject *c10d; /* torch.distributed.distributed_c10d */
static PyObject *wrapped[NOPS];
static PyTypeObject *tensor_type;
static struct dtype_info dtypes[DTYPES_MAX];
static int ndtypes;
static int my_rank = -1;
static _Atomic int pub_rank = -1;
static _Atomic int pub_count;

const char *comm_wrap_op_name(int op)
{
	return op >= 0 && op < NOPS ? ops[op].name : "?";
}

int comm_wrap_count(void)
{
	return atomic_load(&pub_count);
}

int comm_wrap_rank(void)
{
	return atomic_load(&pub_rank);
}

/* Unix seconds, for a record's ts. */
static double unix_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the arguments ----------------------------------------------------- */

static PyObject *arg(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
		     int pos, const char *kw)
{
	if (pos >= 0 && pos < nargs)
		return args[pos];
	if (!kwnames || !kw)
		return NULL;
	for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++)
		if (PyUnicode_CompareWithASCIIString(
			    PyTuple_GET_ITEM(kwnames, i), kw) == 0)
			return args[nargs + i];
	return NULL;
}

/* c10d's module attribute name, or (torch 2.x) _world.alt (new ref). */
static PyObject *c10d_state(const char *name, const char *alt)
{
	PyObject *o = PyObject_GetAttrString(c10d, name), *world;

	if (o)
		return o;
	PyErr_Clear();
	world = PyObject_GetAttrString(c10d, "_world");
	o = world ? PyObject_GetAttrString(world, alt) : NULL;
	Py_XDECREF(world);
	if (!o)
		PyErr_Clear();
	return o;
}

static void ranks_text(PyObject *g, char *out, size_t n)
{
	PyObject *all = c10d_state("_pg_group_ranks", "pg_group_ranks");
	PyObject *ranks = all ? PyDict_GetItemWithError(all, g) : NULL;
	PyObject *key, *val;
	Py_ssize_t pos = 0;
	size_t len = 0;

	out[0] = '\0';
	while (ranks && PyDict_Check(ranks) &&
	       PyDict_Next(ranks, &pos, &key, &val) && len + 1 < n) {
		long r = PyLong_AsLong(key);
		int k = snprintf(out + len, n - len, "%s%ld", len ? "," : "",
				 r);

		if (k < 0 || (size_t)k >= n - len) {
			out[len] = '\0';
			break;
		}
		len += (size_t)k;
	}
	Py_XDECREF(all);
	PyErr_Clear();
}

/* Process group g, or the default group for None (new reference; NULL
 * when there is none). */
static PyObject *resolve_group(PyObject *g)
{
	PyObject *member, *world;

	if (g && g != Py_None)
		return Py_NewRef(g);
	member = PyObject_GetAttrString(c10d, "GroupMember");
	world = member ? PyObject_GetAttrString(member, "WORLD") : NULL;
	Py_XDECREF(member);
	if (world == Py_None)
		Py_CLEAR(world);
	PyErr_Clear();
	return world;
}

/* The comm_log group of process group pg; -1 when it cannot be named. */
static int group_of(PyObject *pg)
{
	PyObject *names, *name;
	const char *cname;
	char ranks[COMM_RANKS_MAX + 8];
	int idx = -1;

	names = pg ? c10d_state("_pg_names", "pg_names") : NULL;
	name = names && PyDict_Check(names) ? PyDict_GetItemWithError(names, pg)
					    : NULL;
	cname = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
	if (cname && (idx = comm_log_find(log_, cname)) < 0) {
		/* New: its ranks, once. */
		ranks_text(pg, ranks, sizeof(ranks));
		idx = comm_log_group(log_, cname, ranks);
	}
	Py_XDECREF(names);
	PyErr_Clear();
	return idx;
}

/* torch's sequence number of pg's next collective (the same on every
 * rank: it counts every collective of the group, those made before the
 * agent came and in C++ too); 0 when pg has none. */
static int64_t torch_seq(PyObject *pg)
{
	PyObject *r = pg ? PyObject_CallMethod(pg, "_get_sequence_number_for_group",
					       NULL)
			 : NULL;
	int64_t seq = r && PyLong_Check(r) ? PyLong_AsLongLong(r) + 1 : 0;

	Py_XDECREF(r);
	PyErr_Clear();
	return seq > 0 ? seq : 0;
}

/* This process's global rank, once the default group has one. */
static void find_rank(void)
{
	PyObject *fn = PyObject_GetAttrString(c10d, "get_rank");
	PyObject *r = fn ? PyObject_CallNoArgs(fn) : NULL;

	if (r && PyLong_Check(r))
		my_rank = (int)PyLong_AsLong(r);
	atomic_store(&pub_rank, my_rank);
	Py_XDECREF(r);
	Py_XDECREF(fn);
	PyErr_Clear();
}

/* ---- the tensors ------------------------------------------------------- */

static const struct dtype_info *dtype_of(PyObject *t)
{
	PyObject *dt = PyObject_GetAttrString(t, "dtype"), *s, *es;
	struct dtype_info *d = NULL;
	const char *text;

	if (!dt)
		return NULL;
	for (int i = 0; i < ndtypes; i++)
		if (dtypes[i].dtype == dt) {
			Py_DECREF(dt);
			return &dtypes[i];
		}
	if (ndtypes == DTYPES_MAX) {
		Py_DECREF(dt);
		return NULL;
	}
	s = PyObject_Str(dt);
	es = PyObject_CallMethod(t, "element_size", NULL);
	text = s ? PyUnicode_AsUTF8(s) : NULL;
	if (text && es && PyLong_Check(es)) {
		d = &dtypes[ndtypes++];
		d->dtype = dt; /* kept */
		d->size = PyLong_AsLongLong(es);
		if (strncmp(text, "torch.", 6) == 0)
			text += 6;
		snprintf(d->name, sizeof(d->name), "%s", text);
	} else {
		Py_DECREF(dt);
	}
	Py_XDECREF(s);
	Py_XDECREF(es);
	return d;
}

/* Bytes of tensor t (-1: not a tensor), with its shape and dtype when
 * shape is not NULL. */
static int64_t tensor_bytes(PyObject *t, char *shape, size_t shapelen,
			    char *dtype, size_t dtypelen)
{
	const struct dtype_info *d;
	PyObject *sh;
	int64_t numel = 1;
	size_t len = 0;

	if (!tensor_type || !PyObject_TypeCheck(t, tensor_type))
		return -1;
	sh = PyObject_GetAttrString(t, "shape");
	if (!sh || !PyTuple_Check(sh)) {
		Py_XDECREF(sh);
		return -1;
	}
	if (shape)
		len = (size_t)snprintf(shape, shapelen, "[");
	for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(sh); i++) {
		long long n = PyLong_AsLongLong(PyTuple_GET_ITEM(sh, i));

		if (n < 0 || __builtin_mul_overflow(numel, (int64_t)n, &numel))
			numel = 0;
		if (shape && len < shapelen)
			len += (size_t)snprintf(shape + len, shapelen - len,
						"%s%lld", i ? ", " : "", n);
	}
	if (shape && len < shapelen)
		snprintf(shape + len, shapelen - len, "]");
	Py_DECREF(sh);
	d = dtype_of(t);
	if (dtype)
		snprintf(dtype, dtypelen, "%s", d ? d->name : "?");
	if (!d || __builtin_mul_overflow(numel, d->size, &numel))
		return -1;
	return numel;
}

static void describe(PyObject *a, int list, struct comm_rec *r)
{
	Py_ssize_t n;
	int64_t sum = 0, b;
	char first[COMM_SHAPE_MAX];

	r->bytes = -1;
	if (!a)
		return;
	if (!list) {
		r->bytes = tensor_bytes(a, r->shape, sizeof(r->shape), r->dtype,
					sizeof(r->dtype));
		return;
	}
	if (!PyList_Check(a) && !PyTuple_Check(a))
		return;
	n = PySequence_Fast_GET_SIZE(a);
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *t = PySequence_Fast_GET_ITEM(a, i);

		b = tensor_bytes(t, i ? NULL : first, sizeof(first),
				 i ? NULL : r->dtype, sizeof(r->dtype));
		if (b < 0 || __builtin_add_overflow(sum, b, &sum))
			return;
	}
	if (n) {
		int k = snprintf(r->shape, sizeof(r->shape), "%zd x ", n);
		size_t room = sizeof(r->shape) - (size_t)k - 1;
		size_t len = strnlen(first, room);

		memcpy(r->shape + k, first, len); /* cut when long */
		r->shape[(size_t)k + len] = '\0';
	}
	r->bytes = sum;
}

/* ---- the call ---------------------------------------------------------- */

/* "TypeError: message" of the exception being raised, which stays set. */
static void exception_text(char *out, size_t n)
{
	PyObject *t, *v, *tb, *s;
	const char *msg = NULL;

	PyErr_Fetch(&t, &v, &tb);
	s = v ? PyObject_Str(v) : NULL;
	msg = s ? PyUnicode_AsUTF8(s) : NULL;
	if (!msg)
		PyErr_Clear();
	snprintf(out, n, "%s%s%s",
		 t && PyType_Check(t) ? ((PyTypeObject *)t)->tp_name
				      : "exception",
		 msg && *msg ? ": " : "", msg ? msg : "");
	Py_XDECREF(s);
	PyErr_Restore(t, v, tb);
}

static PyObject *done_cb(PyObject *self, PyObject *fut)
{
	uint64_t id = PyLong_AsUnsignedLongLong(self);
	PyObject *v = PyObject_CallMethod(fut, "value", NULL);
	char text[COMM_ERROR_MAX];

	if (v) {
		Py_DECREF(v);
		comm_log_end(log_, id, COMM_DONE, comm_log_clock(),
			     NULL);
	} else {
		exception_text(text, sizeof(text));
		PyErr_Clear();
		comm_log_end(log_, id, COMM_FAILED, comm_log_clock(),
			     text);
	}
	Py_RETURN_NONE;
}

static PyMethodDef done_def = {"probing_comm_done", done_cb, METH_O,
			       "records the end of an asynchronous call"};

/* ---- asynchronous work without a future ------------------------------- *
 *
 * Gloo's send and recv Work (torch 1.x) have no future, and report
 * is_completed() only once waited for: their records end when the
 * program waits for them, through Work.wait, wrapped on first need.  A
 * pending entry names its Work by address only (never dereferenced): an
 * entry whose Work was dropped unwaited is overwritten in time.
 */

#define PENDING_MAX 1024

static struct pending {
	const void *work;
	uint64_t id;
} pending[PENDING_MAX];
static unsigned pending_next;
static PyObject *work_cls, *work_wait_orig, *work_wait_ours;

static PyObject *work_wait(PyObject *unused, PyObject *args, PyObject *kwargs)
{
	PyObject *r = PyObject_Call(work_wait_orig, args, kwargs);
	const void *self =
		PyTuple_GET_SIZE(args) ? PyTuple_GET_ITEM(args, 0) : NULL;
	char text[COMM_ERROR_MAX];

	(void)unused;
	for (unsigned i = 0; self && i < PENDING_MAX; i++) {
		if (pending[i].work != self)
			continue;
		pending[i].work = NULL;
		if (r) {
			comm_log_end(log_, pending[i].id, COMM_DONE,
				     comm_log_clock(), NULL);
		} else {
			exception_text(text, sizeof(text));
			comm_log_end(log_, pending[i].id, COMM_FAILED,
				     comm_log_clock(), text);
		}
		break;
	}
	return r;
}

static PyMethodDef work_wait_def = {
	"wait", (PyCFunction)(void (*)(void))work_wait,
	METH_VARARGS | METH_KEYWORDS,
	"Work.wait, noting for Probing when a send or recv ends"};

/* Wraps type(work).wait once; 0 or -1. */
static int wrap_work_wait(PyObject *work)
{
	PyObject *cls = (PyObject *)Py_TYPE(work), *f, *fn, *m;

	if (work_wait_ours)
		return cls == work_cls ? 0 : -1;
	f = PyObject_GetAttrString(cls, "wait");
	fn = f ? PyCFunction_New(&work_wait_def, NULL) : NULL;
	m = fn ? PyInstanceMethod_New(fn) : NULL;
	Py_XDECREF(fn);
	if (!m || PyObject_SetAttrString(cls, "wait", m)) {
		Py_XDECREF(m);
		Py_XDECREF(f);
		PyErr_Clear();
		return -1;
	}
	work_cls = Py_NewRef(cls);
	work_wait_orig = f;
	work_wait_ours = m;
	return 0;
}

static void unwrap_work_wait(void)
{
	PyObject *cur;

	if (!work_wait_ours)
		return;
	cur = PyDict_GetItemString(((PyTypeObject *)work_cls)->tp_dict, "wait");
	if (cur == work_wait_ours &&
	    PyObject_SetAttrString(work_cls, "wait", work_wait_orig))
		PyErr_Clear();
	Py_CLEAR(work_wait_ours);
	Py_CLEAR(work_wait_orig);
	Py_CLEAR(work_cls);
	memset(pending, 0, sizeof(pending));
}

/* An asynchronous call returned work: its record ends with its future,
 * or when the program waits for it. */
static void watch_work(uint64_t id, PyObject *work)
{
	PyObject *fut = NULL, *key = NULL, *cb = NULL, *r = NULL;

	fut = PyObject_CallMethod(work, "get_future", NULL);
	key = fut ? PyLong_FromUnsignedLongLong(id) : NULL;
	cb = key ? PyCFunction_New(&done_def, key) : NULL;
	r = cb ? PyObject_CallMethod(fut, "add_done_callback", "O", cb) : NULL;
	if (!r) {
		PyErr_Clear();
		if (wrap_work_wait(work) == 0) {
			for (unsigned i = 0; i < PENDING_MAX; i++)
				if (pending[i].work == work) /* a dead one's */
					pending[i].work = NULL;
			pending[pending_next % PENDING_MAX] =
				(struct pending){work, id};
			pending_next++;
		} else {
			comm_log_end(log_, id, COMM_DONE, 0,
				     "its end is not observable (the Work "
				     "has no future)");
		}
	}
	Py_XDECREF(r);
	Py_XDECREF(cb);
	Py_XDECREF(key);
	Py_XDECREF(fut);
}

static PyObject *wrap_vectorcall(PyObject *self, PyObject *const *args,
				 size_t nargsf, PyObject *kwnames)
{
	struct wrap *w = (struct wrap *)self;
	Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
	const struct op_spec *o = &ops[w->op];
	struct comm_rec r;
	PyObject *a, *res, *pg;
	uint64_t id;

	if (!on)
		return PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
	memset(&r, 0, sizeof(r));
	r.op = w->op;
	r.state = COMM_RUNNING;
	r.thread = (int64_t)PyThread_get_thread_ident();
	pg = resolve_group(arg(args, nargs, kwnames, o->group, "group"));
	r.group = group_of(pg);
	r.seq = comm_log_next_seq(log_, r.group);
	if (!o->p2p) /* point-to-point calls do not count in torch's */
		r.pg_seq = torch_seq(pg);
	Py_XDECREF(pg);
	if (my_rank < 0)
		find_rank();
	r.rank = my_rank;
	describe(arg(args, nargs, kwnames, o->tensor, o->tensor_kw), o->list,
		 &r);
	a = o->async == ALWAYS
		    ? Py_True
		    : arg(args, nargs, kwnames, o->async, "async_op");
	r.async = a && PyObject_IsTrue(a) == 1;
	a = arg(args, nargs, kwnames, o->peer, o->peer_kw);
	r.peer = a && PyLong_Check(a) ? (int32_t)PyLong_AsLong(a) : o->peer_def;
	PyErr_Clear();
	r.ts = unix_s();
	r.t0 = comm_log_clock();
	id = comm_log_begin(log_, &r);

	res = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
	if (!res) {
		exception_text(r.error, sizeof(r.error));
		comm_log_end(log_, id, COMM_FAILED, comm_log_clock(),
			     r.error);
	} else if (r.async && res != Py_None) {
		watch_work(id, res);
	} else {
		comm_log_end(log_, id, COMM_DONE, comm_log_clock(),
			     NULL);
	}
	return res;
}

/* ---- the wrapper type -------------------------------------------------- */

static void wrap_dealloc(PyObject *self)
{
	Py_XDECREF(((struct wrap *)self)->orig);
	Py_TYPE(self)->tp_free(self);
}

static PyObject *wrap_repr(PyObject *self)
{
	return PyObject_Repr(((struct wrap *)self)->orig);
}

static Py_hash_t wrap_hash(PyObject *self)
{
	return PyObject_Hash(((struct wrap *)self)->orig);
}

/* Equal to its original (P2POp checks `op in [isend, irecv]`). */
static PyObject *wrap_richcompare(PyObject *self, PyObject *other, int op)
{
	if (Py_TYPE(other) == Py_TYPE(self))
		other = ((struct wrap *)other)->orig;
	return PyObject_RichCompare(((struct wrap *)self)->orig, other, op);
}

/* __wrapped__ is the original; every other attribute but the type's
 * own is the original's (__name__, __doc__, __module__, ...). */
static PyObject *wrap_getattro(PyObject *self, PyObject *name)
{
	PyObject *orig = ((struct wrap *)self)->orig;

	if (PyUnicode_Check(name) &&
	    PyUnicode_CompareWithASCIIString(name, "__wrapped__") == 0)
		return Py_NewRef(orig);
	if (PyUnicode_Check(name) &&
	    PyUnicode_CompareWithASCIIString(name, "__class__") == 0)
		return PyObject_GenericGetAttr(self, name);
	return PyObject_GetAttr(orig, name);
}

/* Bound like a function when stored on a class. */
static PyObject *wrap_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
	(void)type;
	if (!obj || obj == Py_None)
		return Py_NewRef(self);
	return PyMethod_New(self, obj);
}

static PyTypeObject wrap_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "probing.CommWrapper",
	.tp_basicsize = sizeof(struct wrap),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
	.tp_doc = "a torch.distributed function whose calls Probing records "
		  "(__wrapped__ is the function)",
	.tp_vectorcall_offset = offsetof(struct wrap, vectorcall),
	.tp_call = PyVectorcall_Call,
	.tp_dealloc = wrap_dealloc,
	.tp_repr = wrap_repr,
	.tp_hash = wrap_hash,
	.tp_richcompare = wrap_richcompare,
	.tp_getattro = wrap_getattro,
	.tp_descr_get = wrap_descr_get,
};

/* ---- install and remove ------------------------------------------------ */

static void drop_refs(void)
{
	Py_CLEAR(dist);
	Py_CLEAR(c10d);
	Py_CLEAR(tensor_type);
}

int comm_wrap_install(struct comm_log *log, char *err, size_t errlen)
{
	PyObject *tensor;
	int n = 0;

	if (dist) {
		on = 1;
		return 0;
	}
	if (!pymods_ready("torch.distributed") ||
	    !pymods_ready("torch.distributed.distributed_c10d"))
		return -EAGAIN;
	if (PyType_Ready(&wrap_type)) {
		PyErr_Clear();
		snprintf(err, errlen, "cannot make the wrapper type");
		return -ENOMEM;
	}
	dist = pymods_get("torch.distributed");
	c10d = pymods_get("torch.distributed.distributed_c10d");
	tensor = pymods_attr("torch", "Tensor");
	if (!dist || !c10d || !tensor || !PyType_Check(tensor)) {
		Py_XDECREF(tensor);
		drop_refs();
		snprintf(err, errlen,
			 "torch.distributed has no "
			 "distributed_c10d (torch.distributed."
			 "is_available() is false?)");
		return -ENOTSUP;
	}
	tensor_type = (PyTypeObject *)tensor;
	log_ = log;
	for (int i = 0; i < NOPS; i++) {
		PyObject *f = PyObject_GetAttrString(dist, ops[i].name);
		struct wrap *w;

		if (!f || Py_TYPE(f) == &wrap_type) {
			PyErr_Clear();
			Py_XDECREF(f);
			continue;
		}
		w = PyObject_New(struct wrap, &wrap_type);
		if (!w) {
			Py_DECREF(f);
			PyErr_Clear();
			continue;
		}
		w->vectorcall = wrap_vectorcall;
		w->orig = f; /* owned */
		w->op = i;
		if (PyObject_SetAttrString(dist, ops[i].name, (PyObject *)w)) {
			PyErr_Clear();
			Py_DECREF(w);
			continue;
		}
		wrapped[i] = (PyObject *)w; /* the module has one, we another */
		n++;
	}
	on = 1;
	atomic_store(&pub_count, n);
	return 0;
}

void comm_wrap_remove(void)
{
	on = 0;
	unwrap_work_wait();
	for (int i = 0; i < NOPS; i++) {
		struct wrap *w = (struct wrap *)wrapped[i];
		PyObject *cur;

		if (!w)
			continue;
		cur = dist ? PyObject_GetAttrString(dist, ops[i].name) : NULL;
		if (cur == (PyObject *)w &&
		    PyObject_SetAttrString(dist, ops[i].name, w->orig))
			PyErr_Clear();
		PyErr_Clear();
		Py_XDECREF(cur);
		Py_CLEAR(wrapped[i]);
	}
	atomic_store(&pub_count, 0);
	drop_refs();
}
