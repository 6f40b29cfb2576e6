/*
 * pycompat: the public C API of the newest CPython the agent supports,
 * on every version it supports (3.9 to 3.15), as pythoncapi-compat does.
 *
 * Code outside agent/cpython is written against this API and includes
 * this header after <Python.h>; where a version lacks a function, it is
 * defined here from what that version has, with the same contract
 * (references, errors).  What differs by more than a missing function
 * (frames' locals, tracing, memory layouts) is behind cpython.h instead.
 */
#ifndef CPYTHON_PYCOMPAT_H
#define CPYTHON_PYCOMPAT_H

#include <Python.h>

#if PY_VERSION_HEX < 0x03090000 || PY_VERSION_HEX >= 0x03100000
#error "Probing supports CPython 3.9 to 3.15"
#endif

#if PY_VERSION_HEX < 0x030B0000
/* PyFrame_GetBack and friends are declared here up to 3.10. */
#include <frameobject.h>
#endif

#if PY_VERSION_HEX < 0x030A0000
/* 3.10: new references in one expression. */
static inline PyObject *probing_compat_newref(PyObject *o)
{
	Py_INCREF(o);
	return o;
}

static inline PyObject *probing_compat_xnewref(PyObject *o)
{
	Py_XINCREF(o);
	return o;
}
#define Py_NewRef(o) probing_compat_newref((PyObject *)(o))
#define Py_XNewRef(o) probing_compat_xnewref((PyObject *)(o))

/* 3.10: the collector switched on or off from C; the previous state.
 * pycompat.c. */
int probing_compat_gc(int on);
#define PyGC_Enable() probing_compat_gc(1)
#define PyGC_Disable() probing_compat_gc(0)
#endif

#if PY_VERSION_HEX < 0x030B0000
/* 3.11: a type's __name__ and __qualname__, new references. */
static inline PyObject *PyType_GetName(PyTypeObject *type)
{
	return PyObject_GetAttrString((PyObject *)type, "__name__");
}

static inline PyObject *PyType_GetQualName(PyTypeObject *type)
{
	return PyObject_GetAttrString((PyObject *)type, "__qualname__");
}
#endif

#if PY_VERSION_HEX < 0x030D0000
/* 3.13: the referent as a new reference in *ref: 1, or 0 with *ref NULL
 * when it is dead, or -1 with an exception set when ref is no weak
 * reference. */
static inline int PyWeakref_GetRef(PyObject *ref, PyObject **out)
{
	PyObject *o;

	*out = NULL;
	if (!PyWeakref_Check(ref)) {
		PyErr_SetString(PyExc_TypeError, "expected a weakref");
		return -1;
	}
	o = PyWeakref_GET_OBJECT(ref);
	if (o == Py_None)
		return 0;
	Py_INCREF(o);
	*out = o;
	return 1;
}
#else
/* 3.13 moved it to the internal headers; libpython still exports it
 * (sys.getsizeof's own function: the size with the GC header). */
PyAPI_FUNC(size_t) _PySys_GetSizeOf(PyObject *);
#endif

#if PY_VERSION_HEX < 0x030C0000
/* 3.12: the code-object extra slots under their PyUnstable_ names. */
#define PyUnstable_Eval_RequestCodeExtraIndex _PyEval_RequestCodeExtraIndex
#define PyUnstable_Code_GetExtra _PyCode_GetExtra
#define PyUnstable_Code_SetExtra _PyCode_SetExtra
#endif

/* sys.getallocatedblocks(): the blocks the allocator has handed out, or
 * -1.  A function libpython exports up to 3.11 (declared in an internal
 * header only); from 3.12 it is reached through sys.  GIL held. */
#if PY_VERSION_HEX < 0x030C0000
PyAPI_FUNC(Py_ssize_t) _Py_GetAllocatedBlocks(void);
#endif
static inline Py_ssize_t probing_allocated_blocks(void)
{
#if PY_VERSION_HEX < 0x030C0000
	return _Py_GetAllocatedBlocks();
#else
	PyObject *fn = PySys_GetObject("getallocatedblocks"); /* borrowed */
	PyObject *r = fn ? PyObject_CallNoArgs(fn) : NULL;
	Py_ssize_t n = r ? PyLong_AsSsize_t(r) : -1;

	Py_XDECREF(r);
	if (n < 0)
		PyErr_Clear();
	return n;
#endif
}

#endif
