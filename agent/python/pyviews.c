/*
 * pyviews: loads the embedded agent/python/pyviews.py.  See pyviews.h.
 */
#include "cpython/pycompat.h"

#include "pyembed.h"
#include "pyviews.h"
#include "pyviews_src.h"

static PyObject *module; /* GIL; kept for the life of the process */

PyObject *pyviews_get(const char *name)
{
	if (!module && !(module = pyembed_load("probing_views", pyviews_src,
					       "<probing pyviews>")))
		return NULL;
	return PyObject_GetAttrString(module, name);
}
