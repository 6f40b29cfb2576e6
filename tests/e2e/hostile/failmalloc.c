/*
 * failmalloc: fault injection for the hostile suite (test_variables_oom.py).
 * Preloaded into a target (LD_PRELOAD), it fails one chosen allocation made
 * by one shared object's code:
 *
 *	failmalloc_arm("libcjson", n)	the n-th malloc/calloc/realloc
 *					called from libcjson's code from now
 *					returns NULL (errno ENOMEM), once
 *	failmalloc_failed()		how many it failed so far
 *
 * called through ctypes, or by the test through files when FAILMALLOC_DIR
 * names a directory: a thread of this library's own (it runs on while a
 * debugger holds every Python thread) waits for DIR/arm-1, DIR/arm-2, ...
 * each holding "OBJECT N", arms, and answers in DIR/armed-K with
 * "RC FAILED".  This is what an address-space limit does to whichever allocation comes
 * when the heap is full, made repeatable: a test sweeps n over every
 * allocation of one reply.  Every other allocation goes to glibc's.
 *
 * The caller is told by its return address, checked against the object's
 * executable segments (found once, at arming, by dl_iterate_phdr): a
 * compare per allocation, no lock, no allocation of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);

#define SEGS_MAX 8

static struct {
	uintptr_t lo, hi;
} segs[SEGS_MAX];
static _Atomic int nsegs;
static _Atomic long countdown = -1; /* -1: disarmed */
static _Atomic long failed;

struct find {
	const char *name;
	int n;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find *f = arg;

	(void)size;
	if (!info->dlpi_name || !strstr(info->dlpi_name, f->name))
		return 0;
	for (int i = 0; i < info->dlpi_phnum && f->n < SEGS_MAX; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		segs[f->n].lo = info->dlpi_addr + ph->p_vaddr;
		segs[f->n].hi = segs[f->n].lo + ph->p_memsz;
		f->n++;
	}
	return 1;
}

/* Arms the n-th allocation (n >= 1) from the object whose path contains
 * name; 0, or -1 when no loaded object matches or n < 1. */
int failmalloc_arm(const char *name, long n)
{
	struct find f = {name, 0};

	atomic_store(&countdown, -1);
	atomic_store(&nsegs, 0);
	if (n < 1 || !name)
		return -1;
	dl_iterate_phdr(find_object, &f);
	if (f.n == 0)
		return -1;
	atomic_store(&nsegs, f.n);
	atomic_store(&countdown, n);
	return 0;
}

long failmalloc_failed(void)
{
	return atomic_load(&failed);
}

/* Is this allocation, called from ret, the one to fail? */
static int fail_now(void *ret)
{
	uintptr_t a = (uintptr_t)ret;
	int n = atomic_load(&nsegs), mine = 0;
	long c;

	if (atomic_load_explicit(&countdown, memory_order_relaxed) < 0)
		return 0;
	for (int i = 0; i < n; i++)
		mine |= a >= segs[i].lo && a < segs[i].hi;
	if (!mine)
		return 0;
	c = atomic_fetch_sub(&countdown, 1);
	if (c != 1)
		return 0; /* not yet, or already spent (then < 0 again) */
	atomic_fetch_add(&failed, 1);
	errno = ENOMEM;
	return 1;
}

void *malloc(size_t n)
{
	return fail_now(__builtin_return_address(0)) ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
	return fail_now(__builtin_return_address(0)) ? NULL
						      : __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
	return fail_now(__builtin_return_address(0)) ? NULL
						      : __libc_realloc(p, n);
}

/* ---- arming through files (FAILMALLOC_DIR) --------------------------- */

static char dir[512];

static int read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return 0;
}

static void *armer(void *arg)
{
	struct timespec ms = {0, 1000000};
	char path[600], buf[256], object[128];
	long n;
	int len;

	(void)arg;
	for (long k = 1;; k++) {
		snprintf(path, sizeof(path), "%s/arm-%ld", dir, k);
		while (read_file(path, buf, sizeof(buf)) < 0 || !strchr(buf, '\n'))
			nanosleep(&ms, NULL);
		if (sscanf(buf, "%127s %ld", object, &n) != 2)
			n = 0;
		int rc = failmalloc_arm(object, n);
		len = snprintf(buf, sizeof(buf), "%d %ld\n", rc,
			       failmalloc_failed());
		snprintf(path, sizeof(path), "%s/armed-%ld.tmp", dir, k);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0600);
		if (fd < 0 || write(fd, buf, (size_t)len) != len)
			return NULL;
		close(fd);
		char done[600];
		snprintf(done, sizeof(done), "%s/armed-%ld", dir, k);
		if (rename(path, done))
			return NULL;
	}
}

__attribute__((constructor)) static void start(void)
{
	const char *d = getenv("FAILMALLOC_DIR");
	pthread_t t;

	if (!d || strlen(d) >= sizeof(dir))
		return;
	strcpy(dir, d);
	if (pthread_create(&t, NULL, armer, NULL) == 0)
		pthread_detach(t);
}
