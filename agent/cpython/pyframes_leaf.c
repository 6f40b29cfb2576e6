/*
 * cpython_leaf: a thread's innermost frames, read by a signal handler on
 * that thread.  Part of the pyframes module (pyframes.h, pyframes_impl.h).
 *
 * ASYNC-SIGNAL-SAFE: everything in this file runs inside the native
 * sampler's signal handler (native.h).  Only raw process_vm_readv system
 * calls, relaxed atomic loads (pyframes_mem_pid_known, pyframes_mem_piped),
 * copies onto the stack and into the caller's buffer: no locks, no
 * allocation, no stdio, no sanitizer interceptors, nothing that is not
 * async-signal-safe may be added here.
 */
#include "pyframes_impl.h"

#include <string.h>

size_t pyframes_leaf_capture(long tid, uintptr_t tstate, void *buf,
			     size_t cap)
{
	struct cpython_leaf *l = buf;
	/* Only the head of the thread state, up to its native id (which
	 * comes after the frame's anchor), where this interpreter has it. */
	unsigned char ts[sizeof(PyThreadState)];
	size_t at = pyl_off(PYL_TSTATE,
			    offsetof(PyThreadState, native_thread_id));
	uintptr_t anchor, f;
	unsigned long native;
	frame_anchor cf;
	pid_t pid;

	if (cap < sizeof(*l))
		return 0;
	if (at > sizeof(ts) - sizeof(native)) { /* pyframes_check refuses it */
		l->n = 0;
		l->complete = 0;
		l->outer = 0;
		return sizeof(*l);
	}
	pid = pyframes_leaf_start(l, tstate, ts, at + sizeof(native));
	if (!pid)
		return sizeof(*l);
	memcpy(&native, ts + at, sizeof(native));
#if PY_VERSION_HEX >= 0x030D0000
	anchor = ANCHOR_OF(tstate, NULL);
#else
	memcpy(&anchor, ts + offsetof(PyThreadState, cframe), sizeof(anchor));
#endif
	/* The thread state must be this thread's (the sampler's listing is
	 * a moment old: it may have been freed and reused). */
	if ((long)native != tid ||
	    pyframes_mem_read_raw(pid, &cf, anchor, sizeof(cf)))
		return sizeof(*l);
	f = (uintptr_t)cf.current_frame;
	/* Shim frames (3.12 on) are passed, also after the last frame kept,
	 * so that outer is a frame the walk lists. */
	for (int steps = 0; f && steps < 2 * CPYTHON_LEAF_MAX; steps++) {
		_PyInterpreterFrame fr;

		if (pyframes_mem_read_raw(pid, &fr, f, FRAME_HEAD))
			return sizeof(*l);
		pyl_fix(PYL_FRAME, &fr, FRAME_HEAD);
		if (FRAME_SHIM(fr)) {
			if (l->n)
				l->f[l->n - 1].entry = 1;
			f = (uintptr_t)fr.previous;
			continue;
		}
		if (l->n == CPYTHON_LEAF_MAX)
			break;
		l->f[l->n].frame = f;
		l->f[l->n].code = FRAME_CODE(fr);
		l->f[l->n].instr = FRAME_INSTR(fr);
		l->f[l->n].entry = FRAME_ENTRY_BYTE(fr);
		l->f[l->n].owner = (unsigned char)fr.owner;
		l->n++;
		f = (uintptr_t)fr.previous;
	}
	if (f && l->n < CPYTHON_LEAF_MAX) /* only shims: give up */
		return sizeof(*l);
	l->outer = f;
	l->complete = 1;
	return sizeof(*l);
}
