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
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* process_vm_readv itself, never the pipe (a pipe per read is too slow for
 * a handler) nor a sanitizer's interceptor: 0 or -1.  Async-signal-safe. */
static int leaf_read(pid_t pid, void *dst, uintptr_t src, size_t len)
{
	struct iovec local = {dst, len}, remote = {(void *)src, len};

	if (!src)
		return -1;
	return syscall(SYS_process_vm_readv, pid, &local, 1UL, &remote, 1UL,
		       0UL) == (long)len
		       ? 0
		       : -1;
}

size_t pyframes_leaf_capture(long tid, uintptr_t tstate, void *buf,
			     size_t cap)
{
	struct cpython_leaf *l = buf;
	/* Only the head of the thread state, up to its native id. */
	unsigned char ts[offsetof(PyThreadState, native_thread_id) +
			 sizeof(unsigned long)];
	pid_t pid = pyframes_mem_pid_known();
	uintptr_t cframe, f;
	unsigned long native;
	_PyCFrame cf;

	if (cap < sizeof(*l))
		return 0;
	l->n = 0;
	l->complete = 0;
	l->outer = 0;
	/* pid 0: no walk on this side yet (its pthread_once is not for a
	 * handler); the pipe: too slow here. */
	if (!pid || pyframes_mem_piped() ||
	    leaf_read(pid, ts, tstate, sizeof(ts)))
		return sizeof(*l);
	memcpy(&native, ts + offsetof(PyThreadState, native_thread_id),
	       sizeof(native));
	memcpy(&cframe, ts + offsetof(PyThreadState, cframe), sizeof(cframe));
	/* The thread state must be this thread's (the sampler's listing is
	 * a moment old: it may have been freed and reused). */
	if ((long)native != tid || leaf_read(pid, &cf, cframe, sizeof(cf)))
		return sizeof(*l);
	f = (uintptr_t)cf.current_frame;
	while (f && l->n < CPYTHON_LEAF_MAX) {
		_PyInterpreterFrame fr;
		unsigned char entry;

		if (leaf_read(pid, &fr, f, FRAME_HEAD))
			return sizeof(*l);
		memcpy(&entry,
		       (const char *)&fr +
			       offsetof(_PyInterpreterFrame, is_entry),
		       1);
		l->f[l->n].frame = f;
		l->f[l->n].code = (uintptr_t)fr.f_code;
		l->f[l->n].instr = (uintptr_t)fr.prev_instr;
		l->f[l->n].entry = entry == 1;
		l->f[l->n].owner = (unsigned char)fr.owner;
		l->n++;
		f = (uintptr_t)fr.previous;
	}
	l->outer = f;
	l->complete = 1;
	return sizeof(*l);
}
