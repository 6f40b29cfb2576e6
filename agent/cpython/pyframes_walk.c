/*
 * pyframes_walk: a thread's frames, read without the GIL: the full walk
 * (names and lines) and the sampler's raw one.  Part of the pyframes
 * module (pyframes.h, pyframes_impl.h).
 */
#include "pyframes_impl.h"

#include <errno.h>
#include <string.h>

/* Fills f from the copies fr (of the frame at address at) and co (of its
 * code object).  0 or -EFAULT. */
static int frame_fill(struct cpython_frame *f, uintptr_t at,
		      const _PyInterpreterFrame *fr, const PyCodeObject *co)
{
	uintptr_t code = FRAME_CODE(*fr);
	uintptr_t first = CODE_FIRST(code);
	PyBytesObject lt;
	long addr;

	if (pyframes_code_str((uintptr_t)co->co_qualname, f->func,
			      sizeof(f->func)) ||
	    pyframes_code_str((uintptr_t)co->co_filename, f->file,
			      sizeof(f->file)))
		return -EFAULT;
	f->code = code;
	f->lineno = 0;
	if (fr->frame_obj) {
		PyFrameObject fo;

		/* A tracer's line, when the frame object is this frame's
		 * (not a freed one whose memory was reused). */
		if (pyframes_mem_read(&fo, (uintptr_t)fr->frame_obj,
				      sizeof(fo)))
			return -EFAULT;
		if (fo.ob_base.ob_type == &PyFrame_Type &&
		    (uintptr_t)fo.f_frame == at && fo.f_lineno > 0)
			f->lineno = fo.f_lineno;
	}
	if (f->lineno)
		return 0;
	if (pyframes_mem_read(&lt, (uintptr_t)co->co_linetable,
			      offsetof(PyBytesObject, ob_sval)))
		return -EFAULT;
	if (lt.ob_base.ob_base.ob_type != &PyBytes_Type ||
	    lt.ob_base.ob_size < 0 || lt.ob_base.ob_size > LINETABLE_MAX)
		return -EFAULT;
	addr = ((intptr_t)(FRAME_INSTR(*fr) - first)) /
	       (long)sizeof(_Py_CODEUNIT) * (long)sizeof(_Py_CODEUNIT);
	struct lt_reader rd = {
		.base = (uintptr_t)co->co_linetable +
			offsetof(PyBytesObject, ob_sval),
		.len = (size_t)lt.ob_base.ob_size,
	};
	f->lineno = pyframes_code_line(&rd, co->co_firstlineno, addr);
	if (f->lineno < -1) /* a table read while it was replaced */
		f->lineno = -1;
	return 0;
}

int pyframes_walk(const struct cpython_thread *t, struct cpython_frame *out,
		  size_t max, size_t *n, int *truncated, char *err,
		  size_t errlen)
{
	PyThreadState ts;
	frame_anchor cf;
	uintptr_t f;
	size_t steps = 0, limit = max + PYFRAMES_SKIP_MAX;

	*n = 0;
	*truncated = 0;
	if (pyframes_mem_read(&ts, t->tstate, sizeof(ts)) == 0)
		pyl_fix(PYL_TSTATE, &ts, sizeof(ts));
	else
		ts.thread_id = 0;
	if (!ts.thread_id || ts.thread_id != t->thread_id) {
		errbuf_set(err, errlen, "thread %llu is gone",
			   (unsigned long long)t->thread_id);
		return -ESRCH;
	}
	if (!ANCHOR_OF(t->tstate, &ts))
		return 0;
	if (pyframes_mem_read(&cf, ANCHOR_OF(t->tstate, &ts), sizeof(cf)))
		goto fault;
	f = (uintptr_t)cf.current_frame;
	while (f) {
		_PyInterpreterFrame fr;
		PyCodeObject co;
		uintptr_t first, at = f;

		if (steps++ >= limit) {
			*truncated = 1;
			break;
		}
		if (pyframes_mem_read(&fr, f, FRAME_HEAD))
			goto fault;
		pyl_fix(PYL_FRAME, &fr, FRAME_HEAD);
		if (FRAME_SHIM(fr)) { /* no code object (3.13: None) */
			f = (uintptr_t)fr.previous;
			continue;
		}
		if (pyframes_mem_read(&co, FRAME_CODE(fr), CODE_HEAD))
			goto fault;
		pyl_fix(PYL_CODE, &co, CODE_HEAD);
		if (co.ob_base.ob_base.ob_type != &PyCode_Type ||
		    co.ob_base.ob_size <= 0 ||
		    co.ob_base.ob_size > CODE_SIZE_MAX ||
		    co._co_firsttraceable < 0)
			goto fault;
		f = (uintptr_t)fr.previous;
		/* _PyFrame_IsIncomplete: set up but not yet RESUMEd. */
		first = CODE_FIRST(FRAME_CODE(fr));
		if (fr.owner != FRAME_OWNED_BY_GENERATOR &&
		    FRAME_INSTR(fr) < first + (uintptr_t)co._co_firsttraceable *
						      sizeof(_Py_CODEUNIT))
			continue;
		if (*n == max) {
			*truncated = 1;
			break;
		}
		if (frame_fill(&out[*n], at, &fr, &co))
			goto fault;
		(*n)++;
	}
	return 0;
fault:
	errbuf_set(err, errlen, "frames of thread %llu changed while read",
		   (unsigned long long)t->thread_id);
	return -EFAULT;
}

/* s->frameaddr..owner[0..nf) (innermost first) to out: the code objects
 * the caller does not vouch for are read in one gathered call and checked,
 * incomplete frames skipped.  0, or -EFAULT when a code object is not
 * one (out[0..*n) is still valid).  *truncated as pyframes_walk_raw. */
int pyframes_walk_resolve(struct cpython_scratch *s, size_t nf,
			  const struct cpython_trust *trust, int *truncated,
			  struct cpython_raw *out, size_t max, size_t *n)
{
	int rc = 0;

	pyframes_read_untrusted(s, nf, trust, *truncated);
	for (size_t i = 0, g = 0; i < nf; i++) {
		const PyCodeObject *co = s->trusted[i] ? NULL : &s->code[g++];
		uintptr_t first = CODE_FIRST(s->codeaddr[i]);
		struct cpython_raw *r;
		intptr_t off;

		if (co && (co->ob_base.ob_base.ob_type != &PyCode_Type ||
			   co->ob_base.ob_size <= 0 ||
			   co->ob_base.ob_size > CODE_SIZE_MAX ||
			   co->_co_firsttraceable < 0)) {
			rc = -EFAULT;
			break;
		}
		/* _PyFrame_IsIncomplete, as in pyframes_walk (a trusted
		 * frame was complete when the caller saw it, and stays so). */
		if (co && s->owner[i] != FRAME_OWNED_BY_GENERATOR &&
		    s->prev_instr[i] <
			    first + (uintptr_t)co->_co_firsttraceable *
					    sizeof(_Py_CODEUNIT))
			continue;
		if (*n == max) {
			*truncated = 1;
			break;
		}
		r = &out[(*n)++];
		memset(r, 0, sizeof(*r));
		r->frame = s->frameaddr[i];
		r->code = s->codeaddr[i];
		r->eval_entry = s->entry[i];
		r->trusted = !co;
		off = (intptr_t)(s->prev_instr[i] - first);
		if (co) {
			r->qualname = (uintptr_t)co->co_qualname;
			r->filename = (uintptr_t)co->co_filename;
			r->linetable = (uintptr_t)co->co_linetable;
			r->firstlineno = co->co_firstlineno;
			if (off > (intptr_t)co->ob_base.ob_size *
					  (intptr_t)sizeof(_Py_CODEUNIT))
				off = -1;
		} else if (off > (intptr_t)CODE_SIZE_MAX *
					 (intptr_t)sizeof(_Py_CODEUNIT)) {
			off = -1;
		}
		r->lasti =
			off < 0 ? -1
				: (int)(off / (intptr_t)sizeof(_Py_CODEUNIT) *
					(intptr_t)sizeof(_Py_CODEUNIT));
	}
	return rc;
}

int pyframes_walk_raw(const struct cpython_thread *t, struct cpython_scratch *s,
		      const struct cpython_trust *trust,
		      struct cpython_raw *out, size_t max, size_t *n,
		      int *truncated)
{
	frame_anchor cf;
	uintptr_t f, lo = 0, hi = 0;
	size_t nf = 0, limit, steps = 0;
	int rc = 0;

	*n = 0;
	*truncated = 0;
	if (max > CPYTHON_RAW_MAX)
		max = CPYTHON_RAW_MAX;
	limit = max + PYFRAMES_SKIP_MAX;
	if (limit > CPYTHON_RAW_MAX)
		limit = CPYTHON_RAW_MAX;
	/* The thread state as the listing read it a moment ago. */
	if (!t->at[AT_CFRAME])
		return 0;
	/* Its _PyCFrame and the frames of its current data-stack chunk
	 * (innermost at the top) in one system call; frames elsewhere (older
	 * chunks, generators) are read one by one.  The top may have moved
	 * since the listing: what lies outside the copy is read on its own. */
	if (t->at[AT_CHUNK] && t->at[AT_TOP]) {
		uintptr_t base =
			t->at[AT_CHUNK] + offsetof(_PyStackChunk, data);

		hi = t->at[AT_TOP];
		lo = hi > base + BULK_MAX ? hi - BULK_MAX : base;
		if (hi <= lo)
			lo = hi = 0;
	}
	s->local[0].iov_base = &cf;
	s->local[0].iov_len = sizeof(cf);
	s->remote[0].iov_base = (void *)t->at[AT_CFRAME];
	s->remote[0].iov_len = sizeof(cf);
	s->local[1].iov_base = s->bulk;
	s->local[1].iov_len = hi - lo;
	s->remote[1].iov_base = (void *)lo;
	s->remote[1].iov_len = hi - lo;
	if (pyframes_mem_gather(s->local, s->remote, hi > lo ? 2 : 1)) {
		if (pyframes_mem_read(&cf, t->at[AT_CFRAME], sizeof(cf)))
			return -EFAULT;
		lo = hi = 0;
	}
	f = (uintptr_t)cf.current_frame;
	while (f) {
		_PyInterpreterFrame fr;

		if (steps++ >= limit) {
			*truncated = 1;
			break;
		}
		/* In the copy only when the whole header is: written so
		 * that no sum can wrap (a torn `previous` may be anything,
		 * up to the top of the address space). */
		if (f >= lo && f < hi && hi - f >= FRAME_HEAD)
			memcpy(&fr, s->bulk + (f - lo), FRAME_HEAD);
		else if (pyframes_mem_read(&fr, f, FRAME_HEAD)) {
			rc = -EFAULT;
			break;
		}
		pyl_fix(PYL_FRAME, &fr, FRAME_HEAD);
		if (FRAME_SHIM(fr)) {
			/* Its callee is the first frame of a C-level call. */
			if (nf)
				s->entry[nf - 1] = 1;
			f = (uintptr_t)fr.previous;
			continue;
		}
		s->frameaddr[nf] = f;
		s->codeaddr[nf] = FRAME_CODE(fr);
		s->prev_instr[nf] = FRAME_INSTR(fr);
		/* A bool in memory that may be changing under us: read as a
		 * byte (a torn copy must not be a bool that is neither). */
		s->entry[nf] = FRAME_ENTRY_BYTE(fr);
		s->owner[nf] = (unsigned char)fr.owner;
		nf++;
		f = (uintptr_t)fr.previous;
	}
	return pyframes_walk_resolve(s, nf, trust, truncated, out, max, n)
		       ? -EFAULT
		       : rc;
}

uintptr_t pyframes_gen_frame_addr(struct _object *gen, struct _object *code)
{
	/* The frame lives in gen (the GIL is held: it stays, and is read
	 * in place); taken as the walker takes frames, it must run gen's
	 * code. */
	uintptr_t at = (uintptr_t)gen + offsetof(PyGenObject, gi_iframe);
	_PyInterpreterFrame fr;

	memcpy(&fr, (const void *)at, FRAME_HEAD);
	pyl_fix(PYL_FRAME, &fr, FRAME_HEAD);
	return FRAME_CODE(fr) == (uintptr_t)code ? at : 0;
}
