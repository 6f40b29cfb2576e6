/*
 * inject/maps and inject/elfsym: /proc/PID/maps parsing, and symbol
 * addresses computed from the ELF file checked against the dynamic
 * linker's own answer (dlsym) in this very process.
 */
#include "test.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "../../inject/elfsym.c"
#include "../../inject/maps.c"

static const char sample[] =
	"00400000-0041f000 r--p 00000000 fe:00 247970     /usr/bin/python3.11\n"
	"0041f000-006d2000 r-xp 0001f000 fe:00 247970     /usr/bin/python3.11\n"
	"006d2000-00945000 r--p 002d2000 fe:00 247970     /usr/bin/python3.11\n"
	"00946000-00a85000 rw-p 00545000 fe:00 247970     /usr/bin/python3.11\n"
	"00a85000-00aca000 rw-p 00000000 00:00 0 \n"
	"01b7e000-01c3f000 rw-p 00000000 00:00 0          [heap]\n"
	"7f2f7abe3000-7f2f7ac09000 r--p 00000000 fe:00 332835 "
	"/usr/lib/x86_64-linux-gnu/libc.so.6\n"
	"7f2f7ac09000-7f2f7ad5f000 r-xp 00026000 fe:00 332835 "
	"/usr/lib/x86_64-linux-gnu/libc.so.6\n"
	"7f2f7ae12000-7f2f7ae38000 r-xp 00001000 fe:00 332383 "
	"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2\n"
	"7ffd1000-7ffd2000 rw-p 00000000 00:00 0          /tmp/a b (deleted)\n";

static void test_parse(void)
{
	struct inject_maps m;
	char err[256], *text = strdup(sample);
	const struct inject_mapping *e;

	CHECK(inject_maps_parse(text, strlen(text), &m, err, sizeof(err)) == 0);
	CHECK(m.n == 10);
	CHECK(m.v[1].start == 0x41f000 && m.v[1].end == 0x6d2000);
	CHECK(m.v[1].offset == 0x1f000 && m.v[1].inode == 247970);
	CHECK_STR(m.v[1].perms, "r-xp");
	CHECK_STR(m.v[4].path, "");
	CHECK_STR(m.v[5].path, "[heap]");
	CHECK_STR(m.v[9].path, "/tmp/a b (deleted)");
	e = inject_maps_at(&m, 0x500000);
	CHECK(e == &m.v[1]);
	CHECK(inject_maps_at(&m, 0x945800) == NULL); /* a hole */
	CHECK(inject_maps_at(&m, 0x6d2000) == &m.v[2]);
	CHECK(inject_maps_covers(&m, 0x6d1f00, 0x100, "rx"));
	CHECK(!inject_maps_covers(&m, 0x6d1f00, 0x101, "rx"));
	/* Across two adjacent rw mappings. */
	CHECK(inject_maps_covers(&m, 0xa84f00, 0x200, "rw"));
	CHECK(!inject_maps_covers(&m, 0xac9f00, 0x200, "rw"));
	CHECK(inject_maps_base(&m, "/usr/bin/python3.11") == 0x400000);
	CHECK(inject_maps_base(&m, "/usr/lib/x86_64-linux-gnu/libc.so.6") ==
	      0x7f2f7abe3000);
	CHECK(inject_maps_base(&m, "/nope") == 0);
	{
		static const char *const libc[] = {"libc.so", NULL};
		static const char *const ld[] = {"ld-linux", NULL};
		CHECK(inject_maps_named(m.v[7].path, libc));
		CHECK(!inject_maps_named(m.v[8].path, libc));
		CHECK(inject_maps_named(m.v[8].path, ld));
		CHECK(!inject_maps_named("/usr/lib/mylibc.so", libc));
	}
	inject_maps_release(&m);
}

static void test_bad_maps(void)
{
	struct inject_maps m;
	char err[256], *text = strdup("this is not a maps line\n");

	CHECK(inject_maps_parse(text, strlen(text), &m, err, sizeof(err)) ==
	      -EINVAL);
	CHECK(strstr(err, "bad maps line") != NULL);
	inject_maps_release(&m);
	text = strdup("");
	CHECK(inject_maps_parse(text, 0, &m, err, sizeof(err)) == 0);
	CHECK(m.n == 0);
	inject_maps_release(&m);
}

static void test_self(void)
{
	struct inject_maps m;
	char err[256];

	CHECK(inject_maps_read(getpid(), &m, err, sizeof(err)) == 0);
	CHECK(m.n > 5);
	CHECK(inject_maps_at(&m, (uint64_t)(uintptr_t)&m) != NULL); /* stack */
	CHECK(inject_maps_covers(&m, (uint64_t)(uintptr_t)test_self, 1, "rx"));
	inject_maps_release(&m);
	CHECK(inject_maps_read(0x7ffffff0, &m, err, sizeof(err)) == -ESRCH);
	inject_maps_release(&m);
}

/* The path of the mapped file that holds addr. */
static int file_of(uint64_t addr, char *path, size_t len, uint64_t *base)
{
	struct inject_maps m;
	const struct inject_mapping *e;
	char err[256];
	int ok = 0;

	if (inject_maps_read(getpid(), &m, err, sizeof(err)))
		return 0;
	e = inject_maps_at(&m, addr);
	if (e && e->path[0] == '/') {
		snprintf(path, len, "%s", e->path);
		*base = inject_maps_base(&m, e->path);
		ok = *base != 0;
	}
	inject_maps_release(&m);
	return ok;
}

/* For each symbol: the address computed from the file equals dlsym's. */
static void test_symbols_match_the_loader(void)
{
	static const char *const names[] = {
		"dlopen", "dlerror", "__errno_location", "malloc", "environ"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *want = dlsym(RTLD_DEFAULT, names[i]);
		struct inject_elf *e = NULL;
		char path[4096], err[256];
		uint64_t base, v;

		CHECK(want != NULL);
		if (!want || !file_of((uint64_t)(uintptr_t)want, path,
				      sizeof(path), &base))
			continue;
		CHECK(inject_elf_open(path, &e, err, sizeof(err)) == 0);
		if (!e)
			continue;
		CHECK(inject_elf_symbol(e, names[i], &v) == 0);
		CHECK(base + v - inject_elf_bias(e) ==
		      (uint64_t)(uintptr_t)want);
		CHECK(inject_elf_symbol(e, "no_such_symbol_here", &v) ==
		      -ENOENT);
		inject_elf_free(e);
	}
}

static void test_self_exe(void)
{
	struct inject_elf_seg seg[INJECT_ELF_SEGS];
	struct inject_elf *e = NULL;
	char err[256];
	size_t n;
	int x = 0, w = 0;

	CHECK(inject_elf_open("/proc/self/exe", &e, err, sizeof(err)) == 0);
	if (!e)
		return;
#if defined(__x86_64__)
	CHECK(inject_elf_machine(e) == 62);
#elif defined(__aarch64__)
	CHECK(inject_elf_machine(e) == 183);
#endif
	n = inject_elf_segments(e, seg, INJECT_ELF_SEGS);
	CHECK(n >= 2);
	for (size_t i = 0; i < n; i++) {
		x |= seg[i].flags & 1;
		w |= (seg[i].flags & 2) != 0;
	}
	CHECK(x && w);
	CHECK(inject_elf_bytes(e, 0, 4) != NULL);
	CHECK(!memcmp(inject_elf_bytes(e, 0, 4), "\177ELF", 4));
	CHECK(inject_elf_bytes(e, (uint64_t)1 << 40, 1) == NULL);
	inject_elf_free(e);
}

static void test_bad_files(void)
{
	struct inject_elf *e = NULL;
	char path[] = "/tmp/probing-test-elf-XXXXXX", err[256];
	int fd = mkstemp(path);
	uint8_t head[64 + 56];
	int src;

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, "not an elf file at all", 22) == 22);
	CHECK(inject_elf_open(path, &e, err, sizeof(err)) == -ENOEXEC);
	CHECK(e == NULL);
	/* A real ELF header whose tables point past the end. */
	src = open("/proc/self/exe", O_RDONLY);
	CHECK(src >= 0 && read(src, head, sizeof(head)) == sizeof(head));
	close(src);
	CHECK(ftruncate(fd, 0) == 0 &&
	      pwrite(fd, head, sizeof(head), 0) == sizeof(head));
	CHECK(inject_elf_open(path, &e, err, sizeof(err)) == -ENOEXEC);
	close(fd);
	unlink(path);
	CHECK(inject_elf_open("/nonexistent/file", &e, err, sizeof(err)) ==
	      -ENOENT);
	CHECK(inject_elf_open("/proc/self", &e, err, sizeof(err)) == -ENOEXEC);
}

TEST_MAIN(test_parse, test_bad_maps, test_self, test_symbols_match_the_loader,
	  test_self_exe, test_bad_files)
