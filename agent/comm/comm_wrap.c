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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
	int8_t funcol;	 /* FUNCOL_*: of torch.distributed._functional_collectives */
};

/* The functional collectives (torch 2.x: DTensor, FSDP2, tensor
 * parallelism): named "funcol.NAME", NAME in their module.  Each call
 * returns at once with tensors (AsyncCollectiveTensor) whose first use
 * waits for the collective through the module's wait_tensor: a call's
 * record ends there. */
#define FUNCOL_CALL 1
#define FUNCOL_WAIT 2
#define FUNCOL_PREFIX "funcol."

#define ALL_REDUCE 0 /* its index in ops[] */

static const struct op_spec ops[] = {
	{"all_reduce", 0, "tensor", 0, 2, 3, -1, NULL, -1, 0, 0},
	{"all_reduce_coalesced", 0, "tensors", 1, 2, 3, -1, NULL, -1, 0, 0},
	{"broadcast", 0, "tensor", 0, 2, 3, 1, "src", -1, 0, 0},
	{"reduce", 0, "tensor", 0, 3, 4, 1, "dst", -1, 0, 0},
	{"all_gather", 1, "tensor", 0, 2, 3, -1, NULL, -1, 0, 0},
	{"all_gather_coalesced", 1, "input_tensor_list", 1, 2, 3, -1, NULL, -1, 0, 0},
	{"all_gather_into_tensor", 1, "input_tensor", 0, 2, 3, -1, NULL, -1, 0, 0},
	{"_all_gather_base", 1, "input_tensor", 0, 2, 3, -1, NULL, -1, 0, 0},
	{"reduce_scatter", 1, "input_list", 1, 3, 4, -1, NULL, -1, 0, 0},
	{"reduce_scatter_tensor", 1, "input", 0, 3, 4, -1, NULL, -1, 0, 0},
	{"_reduce_scatter_base", 1, "input", 0, 3, 4, -1, NULL, -1, 0, 0},
	{"gather", 0, "tensor", 0, 3, 4, 2, "dst", 0, 0, 0},
	{"scatter", 0, "tensor", 0, 3, 4, 2, "src", 0, 0, 0},
	{"all_to_all", 1, "input_tensor_list", 1, 2, 3, -1, NULL, -1, 0, 0},
	{"all_to_all_single", 1, "input", 0, 4, 5, -1, NULL, -1, 0, 0},
	{"barrier", -1, NULL, 0, 0, 1, -1, NULL, -1, 0, 0},
	{"monitored_barrier", -1, NULL, 0, 0, -1, -1, NULL, -1, 0, 0},
	{"send", 0, "tensor", 0, 2, -1, 1, "dst", -1, 1, 0},
	{"recv", 0, "tensor", 0, 2, -1, 1, "src", -1, 1, 0},
	{"isend", 0, "tensor", 0, 2, ALWAYS, 1, "dst", -1, 1, 0},
	{"irecv", 0, "tensor", 0, 2, ALWAYS, 1, "src", -1, 1, 0},
	{"broadcast_object_list", -1, NULL, 0, 2, -1, 1, "src", 0, 0, 0},
	{"all_gather_object", -1, NULL, 0, 2, -1, -1, NULL, -1, 0, 0},
	{"gather_object", -1, NULL, 0, 3, -1, 2, "dst", 0, 0, 0},
	{"scatter_object_list", -1, NULL, 0, 3, -1, 2, "src", 0, 0, 0},
#define F FUNCOL_CALL
	{"funcol.broadcast", 0, "self", 0, 2, ALWAYS, 1, "src", -1, 0, F},
	{"funcol.all_reduce", 0, "self", 0, 2, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.all_reduce_coalesced", 0, "self", 1, 2, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.all_gather_tensor", 0, "self", 0, 2, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.all_gather_tensor_autograd", 0, "self", 0, 2, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.all_gather_single", 0, "self", 0, 2, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.all_gather_single_autograd", 0, "self", 0, 2, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.all_gather_into_tensor_coalesced", 0, "self", 1, 1, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.all_gather_single_coalesced", 0, "self", 1, 1, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.reduce_scatter_tensor", 0, "self", 0, 3, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.reduce_scatter_tensor_autograd", 0, "self", 0, 3, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.reduce_scatter_single", 0, "self", 0, 3, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.reduce_scatter_single_autograd", 0, "self", 0, 3, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.reduce_scatter_tensor_coalesced", 0, "inputs", 1, 3, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.reduce_scatter_single_coalesced", 0, "inputs", 1, 3, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.all_to_all_single", 0, "self", 0, 3, ALWAYS, -1, NULL, -1, 0, F},
	{"funcol.all_to_all_single_autograd", 0, "self", 0, 3, ALWAYS, -1, NULL, -1, 0, F},
#undef F
	{"funcol.wait_tensor", -1, NULL, 0, -1, -1, -1, NULL, -1, 0, FUNCOL_WAIT},
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
/* Does this torch number point-to-point calls in the group's sequence?
 * 0 not known yet, 1 yes (2.x), -1 no (1.13). */
static int p2p_counts;
static int on;
static PyObject *dist; /* torch.distributed */
static PyObject *c10d; /* torch.distributed.distributed_c10d */
static PyObject *wrapped[NOPS];
/* What the module holds for the ops dynamo rewrites (shim_of): a Python
 * function around wrapped[i]; NULL where the module holds wrapped[i]. */
static PyObject *shims[NOPS];
static PyObject *shim_factory; /* make_shim below, compiled once */
static PyTypeObject *tensor_type;
static PyObject *funcol;   /* torch.distributed._functional_collectives */
static PyObject *act_type; /* its AsyncCollectiveTensor */
static PyObject *pg_type;  /* torch.distributed.ProcessGroup */
static int funcol_tried;   /* no functional collectives to wait for */
/* A recorded functional call is running on this thread: the calls it
 * makes of its module (torch 2.14's all_gather_tensor calls
 * all_gather_single) are its own, not recorded again. */
static _Thread_local int in_funcol;
static struct dtype_info dtypes[DTYPES_MAX];
static int ndtypes;
static int my_rank = -1;
static _Atomic int pub_rank = -1;
static _Atomic int pub_count;

const char *comm_wrap_op_name(int op)
{
	return op >= 0 && op < NOPS ? ops[op].name : "?";
}

/* Its attribute's name in its module. */
static const char *attr_name(int op)
{
	return ops[op].name + (ops[op].funcol ? strlen(FUNCOL_PREFIX) : 0);
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

void comm_wrap_torch_last(const char *const *names, size_t n, int64_t *last)
{
	PyObject *all, *pg, *name;
	Py_ssize_t pos = 0;

	memset(last, 0, n * sizeof(*last));
	all = c10d ? c10d_state("_pg_names", "pg_names") : NULL;
	while (all && PyDict_Check(all) && PyDict_Next(all, &pos, &pg, &name)) {
		const char *c = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name)
						      : NULL;

		for (size_t i = 0; c && i < n; i++)
			if (!strcmp(c, names[i]))
				last[i] = torch_seq(pg) - 1;
		PyErr_Clear();
	}
	Py_XDECREF(all);
	PyErr_Clear();
	for (size_t i = 0; i < n; i++)
		if (last[i] < 0)
			last[i] = 0;
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

/* Appends text to r->shape (", " between items); an item that does not
 * fit ends it with "...".  Returns 0, or -1 once full. */
static int shape_add(struct comm_rec *r, size_t *len, const char *text)
{
	size_t cap = sizeof(r->shape), need = strlen(text) + (*len ? 2 : 0);

	if (*len + need + 4 > cap) { /* room for ", ..." and the NUL */
		snprintf(r->shape + *len, cap - *len, "%s...", *len ? ", " : "");
		return -1;
	}
	*len += (size_t)snprintf(r->shape + *len, cap - *len, "%s%s",
				 *len ? ", " : "", text);
	return 0;
}

/*
 * What this rank contributes: a tensor's shape, dtype and bytes, or a
 * list's: "4 x [16, 8]" when its tensors are alike, else each one's
 * shape, "[3], [2]" (coalesced calls of parameters of every shape), cut
 * with "..." where the column ends; the bytes summed.
 */
static void describe(PyObject *a, int list, struct comm_rec *r)
{
	Py_ssize_t n;
	int64_t sum = 0, b;
	char first[COMM_SHAPE_MAX], cur[COMM_SHAPE_MAX];
	int alike = 1;

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

		b = tensor_bytes(t, i ? cur : first, sizeof(first),
				 i ? NULL : r->dtype, sizeof(r->dtype));
		if (b < 0 || __builtin_add_overflow(sum, b, &sum))
			return;
		if (i && strcmp(cur, first))
			alike = 0;
	}
	if (n && alike) {
		int k = snprintf(r->shape, sizeof(r->shape), "%zd x ", n);
		size_t room = sizeof(r->shape) - (size_t)k - 1;
		size_t len = strnlen(first, room);

		memcpy(r->shape + k, first, len); /* cut when long */
		r->shape[(size_t)k + len] = '\0';
	} else if (n) {
		size_t len = 0;

		r->shape[0] = '\0';
		for (Py_ssize_t i = 0; i < n; i++) {
			tensor_bytes(PySequence_Fast_GET_ITEM(a, i), cur,
				     sizeof(cur), NULL, 0);
			if (shape_add(r, &len, cur))
				break;
		}
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

/* ---- calls that end when the program waits ---------------------------- *
 *
 * Gloo's send and recv Work (torch 1.x) have no future, and report
 * is_completed() only once waited for: their records end when the
 * program waits for them, through Work.wait, wrapped on first need.  A
 * functional collective's end is its result's first wait (wait_tensor),
 * of the tensor or of a view of it (DTensor unpads a shard with a view
 * before it waits): its entry names the result's storage.  A pending
 * entry names its Work or storage by address only (never dereferenced).
 * One call may have several (a coalesced functional call's tensors): the
 * first wait ends it.  A call whose entries are all pushed out (the
 * program dropped its Work or result unwaited, or waited where Python
 * does not see it: inside a compiled graph, through torch.ops) or
 * dropped when recording stops ends "not observed", with no duration,
 * rather than running for ever.
 */

#define PENDING_MAX 1024

static struct pending {
	const void *key;
	uint64_t id;
} pending[PENDING_MAX];
static unsigned pending_next;
static PyObject *work_cls, *work_wait_orig, *work_wait_ours;

/* Entry i goes; its call, when no other entry waits for it, ends
 * unobserved. */
static void pending_drop(unsigned i)
{
	uint64_t id = pending[i].id;

	pending[i] = (struct pending){NULL, 0};
	for (unsigned k = 0; id && k < PENDING_MAX; k++)
		if (pending[k].id == id)
			return;
	if (id && log_)
		comm_log_end(log_, id, COMM_DONE, 0,
			     "its end was not observed (not waited for "
			     "where Python sees it)");
}

static void pending_add(const void *key, uint64_t id)
{
	for (unsigned i = 0; i < PENDING_MAX; i++)
		if (pending[i].key == key && pending[i].id != id)
			pending_drop(i); /* a dead one's */
	pending_drop(pending_next % PENDING_MAX);
	pending[pending_next % PENDING_MAX] = (struct pending){key, id};
	pending_next++;
}

/* The program waited for key, with result r (NULL: it raised): ends the
 * record waiting for it, if any. */
static void pending_end(const void *key, PyObject *r)
{
	char text[COMM_ERROR_MAX];
	uint64_t id = 0;

	for (unsigned i = 0; key && i < PENDING_MAX; i++)
		if (pending[i].key == key) {
			id = pending[i].id;
			break;
		}
	if (!id)
		return;
	for (unsigned i = 0; i < PENDING_MAX; i++)
		if (pending[i].id == id)
			pending[i] = (struct pending){NULL, 0};
	if (r) {
		comm_log_end(log_, id, COMM_DONE, comm_log_clock(), NULL);
	} else {
		exception_text(text, sizeof(text));
		comm_log_end(log_, id, COMM_FAILED, comm_log_clock(), text);
	}
}

static PyObject *work_wait(PyObject *unused, PyObject *args, PyObject *kwargs)
{
	PyObject *r = PyObject_Call(work_wait_orig, args, kwargs);

	(void)unused;
	pending_end(PyTuple_GET_SIZE(args) ? PyTuple_GET_ITEM(args, 0) : NULL,
		    r);
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
}

static void pending_drop_all(void)
{
	for (unsigned i = 0; i < PENDING_MAX; i++)
		pending_drop(i);
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
			pending_add(work, id);
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

/* ---- functional collectives ------------------------------------------ */

/* The process group a functional call names (new reference, NULL when
 * unknown): a ProcessGroup, a group's name, or a DeviceMesh (and
 * dimension) through the module's own _resolve_group_name.  A list of
 * ranks is left unknown: resolving one may make a group. */
static PyObject *funcol_group(PyObject *g)
{
	PyObject *name = NULL, *pg = NULL;

	if (!g || g == Py_None || PyList_Check(g))
		return NULL;
	if (pg_type && PyObject_TypeCheck(g, (PyTypeObject *)pg_type))
		return Py_NewRef(g);
	/* "(O)": one argument, also when g is a (mesh, dim) tuple. */
	name = PyUnicode_Check(g) ? Py_NewRef(g)
				  : PyObject_CallMethod(funcol,
							"_resolve_group_name",
							"(O)", g);
	if (name && PyUnicode_Check(name))
		pg = PyObject_CallMethod(c10d, "_resolve_process_group", "(O)",
					 name);
	Py_XDECREF(name);
	if (pg && !(pg_type && PyObject_TypeCheck(pg, (PyTypeObject *)pg_type)))
		Py_CLEAR(pg);
	PyErr_Clear();
	return pg;
}

/* Does a functional call's tensor argument hold real data?  Tracing
 * (make_fx, AOTAutograd) calls with FakeTensors and functional tensors,
 * subclasses that no collective runs for; torch.Tensor and Parameter
 * do, and an AsyncCollectiveTensor (another call's result, not waited
 * for yet). */
static int real_tensors(PyObject *a, int list)
{
	if (a && list && (PyList_Check(a) || PyTuple_Check(a)))
		a = PySequence_Fast_GET_SIZE(a) ? PySequence_Fast_GET_ITEM(a, 0)
						: NULL;
	if (!a || !tensor_type)
		return 0;
	return Py_TYPE(a) == tensor_type ||
	       (act_type && Py_TYPE(a) == (PyTypeObject *)act_type) ||
	       !strcmp(Py_TYPE(a)->tp_name, "Parameter");
}

/* What names tensor t in the pending entries: its storage's address
 * (a view's is its base's), or t itself when that cannot be read. */
static const void *storage_key(PyObject *t)
{
	PyObject *st = PyObject_CallMethod(t, "untyped_storage", NULL);
	PyObject *p = st ? PyObject_CallMethod(st, "data_ptr", NULL) : NULL;
	const void *key = t;

	if (p && PyLong_Check(p)) {
		uintptr_t v = (uintptr_t)PyLong_AsUnsignedLongLong(p);

		if (v && !PyErr_Occurred())
			key = (const void *)v;
	}
	Py_XDECREF(p);
	Py_XDECREF(st);
	PyErr_Clear();
	return key;
}

/* A functional call returned res: its record waits for the first wait of
 * one of its AsyncCollectiveTensors (their elem, or a view of it, is what
 * the module's wait_tensor is given); none (waited already): it ended. */
static void watch_funcol(uint64_t id, PyObject *res)
{
	PyObject *one[1] = {res}, *const *items = one;
	Py_ssize_t n = 1;
	int watched = 0;

	if (PyList_Check(res) || PyTuple_Check(res)) {
		items = PySequence_Fast_ITEMS(res);
		n = PySequence_Fast_GET_SIZE(res);
	}
	for (Py_ssize_t i = 0; act_type && i < n; i++) {
		PyObject *elem;

		if (!PyObject_TypeCheck(items[i], (PyTypeObject *)act_type))
			continue;
		elem = PyObject_GetAttrString(items[i], "elem");
		if (elem) {
			pending_add(storage_key(elem), id);
			watched = 1;
		}
		Py_XDECREF(elem);
		PyErr_Clear();
	}
	if (!watched)
		comm_log_end(log_, id, COMM_DONE, comm_log_clock(), NULL);
}

static PyObject *funcol_wait(struct wrap *w, PyObject *const *args,
			     size_t nargsf, PyObject *kwnames)
{
	Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
	PyObject *t = arg(args, nargs, kwnames, 0, "tensor");
	PyObject *r = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
	PyObject *exc[3];
	const void *key;

	if (!t || !tensor_type || !PyObject_TypeCheck(t, tensor_type))
		return r;
	/* The key is read with the result's exception put aside. */
	PyErr_Fetch(&exc[0], &exc[1], &exc[2]);
	key = storage_key(t);
	PyErr_Restore(exc[0], exc[1], exc[2]);
	pending_end(key, r);
	return r;
}

/* A call of w, recorded.  An asynchronous call's record ends with its
 * Work's future; with deferred, the caller ends it instead
 * (comm_wrap_end), given its id there (0: not recorded). */
static PyObject *recorded_call(struct wrap *w, PyObject *const *args,
			       size_t nargsf, PyObject *kwnames,
			       uint64_t *deferred)
{
	Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
	const struct op_spec *o = &ops[w->op];
	struct comm_rec r;
	PyObject *a, *res, *pg;
	int64_t next_seq;
	uint64_t id;

	if (!on)
		return PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
	if (o->funcol == FUNCOL_WAIT)
		return funcol_wait(w, args, nargsf, kwnames);
	a = arg(args, nargs, kwnames, o->tensor, o->tensor_kw);
	if (o->funcol && (in_funcol || !real_tensors(a, o->list)))
		return PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
	memset(&r, 0, sizeof(r));
	r.op = w->op;
	r.state = COMM_RUNNING;
	r.thread = (int64_t)PyThread_get_thread_ident();
	r.native = (int32_t)syscall(SYS_gettid); /* a timeline's track */
	pg = o->funcol ? funcol_group(arg(args, nargs, kwnames, o->group,
					  "group"))
		       : resolve_group(arg(args, nargs, kwnames, o->group,
					   "group"));
	r.group = group_of(pg);
	r.seq = comm_log_next_seq(log_, r.group);
	/* torch's number: every collective takes one; point-to-point calls
	 * too from torch 2.x (1.13 leaves them out), which the first one
	 * to return tells (p2p_counts). */
	next_seq = torch_seq(pg);
	if (!o->p2p || p2p_counts > 0)
		r.pg_seq = next_seq;
	if (my_rank < 0)
		find_rank();
	r.rank = my_rank;
	describe(a, o->list, &r);
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

	in_funcol += o->funcol != 0;
	res = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
	in_funcol -= o->funcol != 0;
	if (o->p2p && p2p_counts == 0 && res && next_seq > 0) {
		p2p_counts = torch_seq(pg) == next_seq + 1 ? 1 : -1;
		if (p2p_counts > 0)
			comm_log_set_pg_seq(log_, id, next_seq);
	}
	Py_XDECREF(pg);
	if (!res) {
		exception_text(r.error, sizeof(r.error));
		comm_log_end(log_, id, COMM_FAILED, comm_log_clock(),
			     r.error);
	} else if (o->funcol) {
		watch_funcol(id, res);
	} else if (r.async && res != Py_None && deferred) {
		*deferred = id;
	} else if (r.async && res != Py_None) {
		watch_work(id, res);
	} else {
		comm_log_end(log_, id, COMM_DONE, comm_log_clock(),
			     NULL);
	}
	return res;
}

static PyObject *wrap_vectorcall(PyObject *self, PyObject *const *args,
				 size_t nargsf, PyObject *kwnames)
{
	return recorded_call((struct wrap *)self, args, nargsf, kwnames,
			     NULL);
}

PyObject *comm_wrap_all_reduce_async(PyObject *tensor, PyObject *pg,
				     uint64_t *id)
{
	static const char *const kw[] = {"group", "async_op"};
	PyObject *args[3] = {tensor, pg, Py_True}, *names, *fn, *r;

	*id = 0;
	names = Py_BuildValue("(ss)", kw[0], kw[1]);
	if (!names)
		return NULL;
	if (wrapped[ALL_REDUCE]) {
		r = recorded_call((struct wrap *)wrapped[ALL_REDUCE], args, 1,
				  names, id);
	} else { /* not recording now: the original, as the module has it */
		fn = dist ? PyObject_GetAttrString(dist, "all_reduce")
			  : pymods_attr("torch.distributed", "all_reduce");
		r = fn ? PyObject_Vectorcall(fn, args, 1, names) : NULL;
		Py_XDECREF(fn);
	}
	Py_DECREF(names);
	return r;
}

void comm_wrap_end(uint64_t id, int ok)
{
	char text[COMM_ERROR_MAX];

	if (!id || !log_)
		return;
	if (ok) {
		comm_log_end(log_, id, COMM_DONE, comm_log_clock(), NULL);
	} else {
		exception_text(text, sizeof(text));
		comm_log_end(log_, id, COMM_FAILED, comm_log_clock(), text);
	}
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

/* ---- torch.compile: the shims --------------------------------------------
 *
 * torch.compile's dynamo rewrites calls of some collectives into
 * functional ones it can put in a graph (torch.distributed.
 * _functional_collectives.traceable_collective_remaps), but only calls of
 * the original Python functions: it cannot see into a C wrapper, so a
 * compiled function calling dist.all_reduce broke its graph there, and
 * failed under fullgraph=True, only because it was watched.  For those
 * ops the module gets a small Python function that calls the original
 * while dynamo traces (torch.compiler.is_compiling(), constant in a
 * trace: dynamo then sees and rewrites the original) and our wrapper
 * otherwise.  A compiled call of them is not recorded (it never runs as
 * Python); an eager one is, as before, through one more Python frame
 * (<probing>).  isend and irecv keep the bare wrapper: P2POp checks its
 * op by ==, which a Python function cannot answer as the original.
 */

static const char *const shimmed[] = {
	"all_reduce",	       "all_gather",	     "all_gather_into_tensor",
	"_all_gather_base",    "reduce_scatter",     "reduce_scatter_tensor",
	"_reduce_scatter_base", "all_to_all_single"};

static const char make_shim_src[] =
	"def make_shim(orig, recorded, is_compiling):\n"
	"    def shim(*args, **kwargs):\n"
	"        if is_compiling():\n"
	"            return orig(*args, **kwargs)\n"
	"        return recorded(*args, **kwargs)\n"
	"    return shim\n";

static int shim_of(const char *name)
{
	for (size_t i = 0; i < sizeof(shimmed) / sizeof(shimmed[0]); i++)
		if (!strcmp(name, shimmed[i]))
			return 1;
	return 0;
}

/* The Python function that the module holds for op i (wrapper w of
 * function orig), or NULL (none needed, or it could not be made: the
 * wrapper is used bare).  New reference. */
static PyObject *make_shim(int i, PyObject *orig, PyObject *w)
{
	PyObject *is_compiling, *g, *code, *shim = NULL;

	if (!ops[i].funcol && !shim_of(ops[i].name))
		return NULL;
	/* torch 2.x only: no dynamo without it. */
	is_compiling = pymods_attr("torch", "compiler.is_compiling");
	if (!is_compiling)
		return NULL;
	if (!shim_factory) {
		g = PyDict_New();
		code = g ? Py_CompileString(make_shim_src, "<probing>",
					    Py_file_input)
			 : NULL;
		if (code && !PyDict_SetItemString(g, "__builtins__",
						  PyEval_GetBuiltins())) {
			PyObject *r = PyEval_EvalCode(code, g, g);

			Py_XDECREF(r);
			shim_factory = PyDict_GetItemString(g, "make_shim");
			Py_XINCREF(shim_factory);
		}
		Py_XDECREF(code);
		Py_XDECREF(g);
	}
	if (shim_factory)
		shim = PyObject_CallFunctionObjArgs(shim_factory, orig, w,
						    is_compiling, NULL);
	Py_DECREF(is_compiling);
	/* The original's face: name, doc, module; __wrapped__ for
	 * inspect.signature (dynamo binds the call's arguments to it). */
	for (const char *const *a = (const char *const[]){
		     "__name__", "__qualname__", "__doc__", "__module__", NULL};
	     shim && *a; a++) {
		PyObject *v = PyObject_GetAttrString(orig, *a);

		if (!v || PyObject_SetAttrString(shim, *a, v))
			PyErr_Clear();
		Py_XDECREF(v);
	}
	if (shim && PyObject_SetAttrString(shim, "__wrapped__", orig))
		Py_CLEAR(shim);
	PyErr_Clear();
	return shim;
}

/* Is f one of our shims (from an installation still in place)? */
static int is_shim(PyObject *f)
{
	PyObject *code = PyFunction_Check(f) ? PyFunction_GetCode(f) : NULL;
	PyObject *file = code ? PyObject_GetAttrString(code, "co_filename")
			      : NULL;
	int ours = file && PyUnicode_Check(file) &&
		   PyUnicode_CompareWithASCIIString(file, "<probing>") == 0;

	Py_XDECREF(file);
	PyErr_Clear();
	return ours;
}

static void drop_refs(void)
{
	Py_CLEAR(funcol);
	Py_CLEAR(act_type);
	Py_CLEAR(pg_type);
	funcol_tried = 0;
	Py_CLEAR(shim_factory);
	Py_CLEAR(dist);
	Py_CLEAR(c10d);
	Py_CLEAR(tensor_type);
}

/* Wraps module mod's functions of ops of kind funcol (0: torch.
 * distributed's); the count wrapped. */
static int wrap_module(PyObject *mod, int kind)
{
	int n = 0;

	for (int i = 0; i < NOPS; i++) {
		PyObject *f;
		struct wrap *w;

		if (!ops[i].funcol != !kind || wrapped[i])
			continue;
		f = PyObject_GetAttrString(mod, attr_name(i));
		if (!f || Py_TYPE(f) == &wrap_type || is_shim(f)) {
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
		shims[i] = make_shim(i, f, (PyObject *)w);
		/* A functional one bare would break every compiled graph
		 * that calls it (dynamo traces them): shimmed or left. */
		if ((kind && !shims[i]) ||
		    PyObject_SetAttrString(mod, attr_name(i),
					   shims[i] ? shims[i] : (PyObject *)w)) {
			PyErr_Clear();
			Py_CLEAR(shims[i]);
			Py_DECREF(w);
			continue;
		}
		wrapped[i] = (PyObject *)w; /* the module has one, we another */
		n++;
	}
	return n;
}

#define FUNCOL_MODULE "torch.distributed._functional_collectives"

/* The functional collectives, once their module is imported (torch 2.x:
 * DTensor, FSDP2, tensor parallelism import it, torch.distributed does
 * not). */
static void funcol_install(void)
{
	if (funcol || funcol_tried || !pymods_ready(FUNCOL_MODULE))
		return;
	funcol_tried = 1;
	funcol = pymods_get(FUNCOL_MODULE);
	act_type = pymods_attr(FUNCOL_MODULE, "AsyncCollectiveTensor");
	pg_type = PyObject_GetAttrString(dist, "ProcessGroup");
	PyErr_Clear();
	if (!funcol || !act_type || !PyType_Check(act_type) || !pg_type ||
	    !PyType_Check(pg_type)) {
		Py_CLEAR(funcol);
		Py_CLEAR(act_type);
		Py_CLEAR(pg_type);
		return;
	}
	atomic_fetch_add(&pub_count, wrap_module(funcol, FUNCOL_CALL));
}

int comm_wrap_funcol_waiting(void)
{
	PyObject *is_compiling;

	if (!dist || funcol || funcol_tried)
		return 0;
	/* Only a torch with torch.compile has them. */
	is_compiling = pymods_attr("torch", "compiler.is_compiling");
	Py_XDECREF(is_compiling);
	PyErr_Clear();
	return is_compiling != NULL;
}

int comm_wrap_install(struct comm_log *log, char *err, size_t errlen)
{
	PyObject *tensor;

	if (dist) {
		on = 1;
		funcol_install();
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
	atomic_store(&pub_count, wrap_module(dist, 0));
	on = 1;
	funcol_install();
	return 0;
}

void comm_wrap_remove(void)
{
	on = 0;
	pending_drop_all();
	unwrap_work_wait();
	for (int i = 0; i < NOPS; i++) {
		struct wrap *w = (struct wrap *)wrapped[i];
		PyObject *cur, *mod;

		if (!w)
			continue;
		mod = ops[i].funcol ? funcol : dist;
		cur = mod ? PyObject_GetAttrString(mod, attr_name(i)) : NULL;
		if (cur && cur == (shims[i] ? shims[i] : (PyObject *)w) &&
		    PyObject_SetAttrString(mod, attr_name(i), w->orig))
			PyErr_Clear();
		PyErr_Clear();
		Py_XDECREF(cur);
		Py_CLEAR(shims[i]);
		Py_CLEAR(wrapped[i]);
	}
	atomic_store(&pub_count, 0);
	drop_refs();
}
