/*
 * pyframes_mem: copies of our own memory that never fault.  See
 * pyframes_mem.h.
 */
#include "pyframes_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fdown.h"
#include "pyframes.h"

/* 0: process_vm_readv; 1: forced pipe (tests); 2: pipe, learned. */
static atomic_int pipe_mode;

/* Our pid, without a system call per read; a forked child learns its
 * own (process_vm_readv on the parent's pid would read the parent). */
static atomic_int my_pid;
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;

static void pid_forget(void)
{
	atomic_store(&my_pid, 0);
}

static void pid_hook(void)
{
	pthread_atfork(NULL, NULL, pid_forget);
}

static pid_t self_pid(void)
{
	int pid = atomic_load_explicit(&my_pid, memory_order_relaxed);

	if (!pid) {
		pthread_once(&pid_once, pid_hook);
		pid = getpid();
		atomic_store_explicit(&my_pid, pid, memory_order_relaxed);
	}
	return pid;
}

/* Copies len bytes at src through a pipe: write() fails with EFAULT on
 * memory we may not read instead of faulting. */
static int pipe_read(void *dst, uintptr_t src, size_t len)
{
	struct fdown rd = {.fd = -1}, wr = {.fd = -1};
	int p[2], rc = 0;
	size_t done = 0;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -EFAULT;
	/* Owned (fdown.h): a number the program takes over meanwhile is
	 * neither written to, read from nor closed. */
	rc = fdown_take(&rd, p[0]);
	if (fdown_take(&wr, p[1]) || rc) {
		fdown_close(&rd);
		fdown_close(&wr);
		return -EFAULT;
	}
	while (done < len) {
		size_t chunk = len - done < 4096 ? len - done : 4096;
		/* The raw system call: a sanitizer's write() interceptor
		 * would check (and report) the very memory we probe. */
		ssize_t w = syscall(SYS_write, wr.fd, (const char *)src + done,
				    chunk);
		ssize_t r;

		if (w != (ssize_t)chunk) {
			rc = -EFAULT;
			break;
		}
		r = read(rd.fd, (char *)dst + done, chunk);
		if (r != (ssize_t)chunk) {
			rc = -EFAULT;
			break;
		}
		done += chunk;
	}
	fdown_close(&rd);
	fdown_close(&wr);
	return rc;
}

/* Copies len bytes of our own memory at src into dst; 0 or -EFAULT.
 * Never faults, whatever src is. */
static int safe_read(void *dst, uintptr_t src, size_t len)
{
	struct iovec local, remote;
	ssize_t n;

	if (!src || src + len < src)
		return -EFAULT;
	if (!len)
		return 0;
	if (atomic_load_explicit(&pipe_mode, memory_order_relaxed))
		return pipe_read(dst, src, len);
	local.iov_base = dst;
	local.iov_len = len;
	remote.iov_base = (void *)src;
	remote.iov_len = len;
	n = process_vm_readv(self_pid(), &local, 1, &remote, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
		atomic_store(&pipe_mode, 2);
		return pipe_read(dst, src, len);
	}
	return -EFAULT;
}

/* Reads n regions in one system call where it can: 0 when all were read,
 * else -EFAULT (what was read is in place; the caller decides).  Falls
 * back to region by region through safe_read. */
static int gather_read(struct iovec *local, struct iovec *remote, size_t n)
{
	size_t total = 0;
	ssize_t r = -1;

	for (size_t i = 0; i < n; i++)
		total += local[i].iov_len;
	if (!atomic_load_explicit(&pipe_mode, memory_order_relaxed))
		r = process_vm_readv(self_pid(), local, n, remote, n, 0);
	if (r == (ssize_t)total)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (safe_read(local[i].iov_base, (uintptr_t)remote[i].iov_base,
			      local[i].iov_len))
			return -EFAULT;
	return 0;
}

void pyframes_force_pipe(int on)
{
	atomic_store(&pipe_mode, on ? 1 : 0);
}

int pyframes_mem_read(void *dst, uintptr_t src, size_t len)
{
	return safe_read(dst, src, len);
}

int pyframes_mem_gather(struct iovec *local, struct iovec *remote, size_t n)
{
	return gather_read(local, remote, n);
}

pid_t pyframes_mem_pid(void)
{
	return self_pid();
}

/* Async-signal-safe: relaxed atomic loads only. */
pid_t pyframes_mem_pid_known(void)
{
	return atomic_load_explicit(&my_pid, memory_order_relaxed);
}

int pyframes_mem_piped(void)
{
	return atomic_load_explicit(&pipe_mode, memory_order_relaxed) != 0;
}

int pyframes_mem_read_raw(pid_t pid, void *dst, uintptr_t src, size_t len)
{
	struct iovec local = {dst, len}, remote = {(void *)src, len};

	if (!src)
		return -1;
	return syscall(SYS_process_vm_readv, pid, &local, 1UL, &remote, 1UL,
		       0UL) == (long)len
		       ? 0
		       : -1;
}
