/*
 * torch_vars: watched variables.  See torch_vars.h.
 */
#include "torch_vars.h"

#include <stdio.h>

#include "cpython/cpython.h"
#include "torch_intern.h"

static int code_matches(PyCodeObject *co, const struct watch_item *it)
{
	PyObject *n = it->qualified ? cpython.frame.qualname(co) : co->co_name;

	return n && PyUnicode_Check(n) &&
	       PyUnicode_CompareWithASCIIString(n, it->func) == 0;
}

static void value_text(PyObject *v, struct torch_var_rec *r)
{
	PyObject *item = NULL, *repr;
	const char *s;

	if (torch_st.tensor_type &&
	    PyObject_TypeCheck(v, torch_st.tensor_type)) {
		PyObject *n = PyObject_CallMethod(v, "numel", NULL);
		if (n && PyLong_Check(n) && PyLong_AsLong(n) == 1)
			item = PyObject_CallMethod(v, "item", NULL);
		Py_XDECREF(n);
		PyErr_Clear();
		if (item)
			v = item;
	}
	if ((PyFloat_Check(v) || PyLong_Check(v)) && !PyBool_Check(v)) {
		r->num = PyFloat_Check(v) ? PyFloat_AS_DOUBLE(v)
					  : PyLong_AsDouble(v);
		if (!PyErr_Occurred()) {
			r->is_num = 1;
			Py_XDECREF(item);
			return;
		}
		PyErr_Clear();
	}
	repr = PyObject_Repr(v);
	s = repr ? PyUnicode_AsUTF8(repr) : NULL;
	if (s)
		snprintf(r->value, sizeof(r->value), "%.*s",
			 torch_st.o.repr_max > 0 &&
					 torch_st.o.repr_max < TORCH_VALUE_MAX
				 ? torch_st.o.repr_max
				 : TORCH_VALUE_MAX - 1,
			 s);
	else
		snprintf(r->value, sizeof(r->value), "<repr failed>");
	PyErr_Clear();
	Py_XDECREF(repr);
	Py_XDECREF(item);
}

/* Records each watched variable from the innermost frame of its function
 * on this thread's stack. */
void torch_vars_record(void)
{
	int done[WATCH_MAX] = {0};
	size_t left = torch_st.o.watch.n;
	PyFrameObject *f = PyEval_GetFrame(), *back;
	PyObject *exc_type, *exc_value, *exc_tb;

	if (!left || !f)
		return;
	PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
	Py_INCREF(f);
	for (int depth = 0; f && left && depth < TORCH_VARS_DEPTH; depth++) {
		PyCodeObject *co = PyFrame_GetCode(f);
		PyObject *locals = NULL;

		for (size_t i = 0; i < torch_st.o.watch.n; i++) {
			const struct watch_item *it =
				&torch_st.o.watch.items[i];
			PyObject *v;

			if (done[i] || !code_matches(co, it))
				continue;
			if (!locals && !(locals = cpython.frame.locals(f))) {
				PyErr_Clear();
				break;
			}
			v = PyMapping_GetItemString(locals, it->name);
			if (!v) {
				PyErr_Clear();
				continue;
			}
			struct torch_var_rec r = {.step = torch_st.step};
			snprintf(r.func, sizeof(r.func), "%s", it->func);
			snprintf(r.name, sizeof(r.name), "%s", it->name);
			value_text(v, &r);
			Py_DECREF(v);
			torch_hooks_emit_var(&r);
			done[i] = 1;
			left--;
		}
		Py_XDECREF(locals);
		Py_DECREF(co);
		back = PyFrame_GetBack(f);
		Py_DECREF(f);
		f = back;
	}
	Py_XDECREF(f);
	PyErr_Restore(exc_type, exc_value, exc_tb);
}
