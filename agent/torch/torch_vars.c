/*
 * torch_vars: watched variables.  See torch_vars.h.
 */
#include "torch_vars.h"

#include <stdio.h>

#include "cpython/cpython.h"
#include "torch_intern.h"
#include "torch_step.h"

static int code_matches(PyCodeObject *co, const struct watch_item *it)
{
	PyObject *n = it->qualified ? cpython.frame.qualname(co) : co->co_name;

	return n && PyUnicode_Check(n) &&
	       PyUnicode_CompareWithASCIIString(n, it->func) == 0;
}

static void value_text(PyObject *v, struct torch_var_rec *r)
{
	PyTypeObject *tensor = torch_hooks_tensor_type();
	int max = torch_hooks_opts()->repr_max;
	PyObject *item = NULL, *repr;
	const char *s;

	if (tensor && PyObject_TypeCheck(v, tensor)) {
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
			 max > 0 && max < TORCH_VALUE_MAX ? max
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
	const struct watch_list *watch = &torch_hooks_opts()->watch;
	int done[WATCH_MAX] = {0};
	size_t left = watch->n;
	PyFrameObject *f = PyEval_GetFrame(), *back;
	PyObject *exc_type, *exc_value, *exc_tb;

	if (!left || !f)
		return;
	PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
	Py_INCREF(f);
	for (int depth = 0; f && left && depth < TORCH_VARS_DEPTH; depth++) {
		PyCodeObject *co = PyFrame_GetCode(f);
		PyObject *locals = NULL;

		for (size_t i = 0; i < watch->n; i++) {
			const struct watch_item *it = &watch->items[i];
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
			struct torch_var_rec r = {.step = torch_step_number(),
						  .at = torch_hooks_now()};
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
