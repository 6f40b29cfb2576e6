/*
 * crash_report: the report writer.  See crash_report.h.
 *
 * Async-signal-safe throughout: numbers are formatted here (no printf),
 * files read with open()/read(), output written with write().
 */
#include "crash_report.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CMDLINE_MAX 1024 /* bytes of /proc/self/cmdline shown */

static void write_all(int fd, const char *p, size_t n)
{
	int tries = 0;

	while (n && tries < 1000) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR) {
			tries++;
			continue;
		}
		if (w <= 0)
			return; /* a full disk or a closed pipe: give up */
		p += w;
		n -= (size_t)w;
	}
}

void crash_out_init(struct crash_out *o)
{
	o->nfd = 0;
	o->mem = NULL;
	o->memcap = o->memlen = 0;
	o->len = 0;
}

void crash_out_fd(struct crash_out *o, int fd)
{
	if (fd >= 0 && o->nfd < CRASH_OUT_FDS)
		o->fd[o->nfd++] = fd;
}

void crash_out_mem(struct crash_out *o, char *mem, size_t cap)
{
	o->mem = cap ? mem : NULL;
	o->memcap = cap;
	o->memlen = 0;
	if (o->mem)
		o->mem[0] = '\0';
}

void crash_out_flush(struct crash_out *o)
{
	for (int i = 0; i < o->nfd; i++)
		write_all(o->fd[i], o->buf, o->len);
	if (o->mem && o->memlen + 1 < o->memcap) {
		size_t k = o->memcap - 1 - o->memlen;

		if (k > o->len)
			k = o->len;
		memcpy(o->mem + o->memlen, o->buf, k);
		o->memlen += k;
		o->mem[o->memlen] = '\0';
	}
	o->len = 0;
}

static void put(struct crash_out *o, const char *p, size_t n)
{
	while (n) {
		size_t k = sizeof(o->buf) - o->len;

		if (!k) {
			crash_out_flush(o);
			continue;
		}
		if (k > n)
			k = n;
		memcpy(o->buf + o->len, p, k);
		o->len += k;
		p += k;
		n -= k;
	}
}

void crash_out_str(struct crash_out *o, const char *s)
{
	put(o, s, strlen(s));
}

void crash_out_esc(struct crash_out *o, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	for (; *s && n < CRASH_LINE_MAX; s++, n++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\\') {
			put(o, "\\\\", 2);
		} else if (c < 0x20 || c == 0x7f) {
			char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
			put(o, e, 4);
		} else {
			put(o, (const char *)&c, 1);
		}
	}
	if (*s)
		put(o, "...", 3);
}

void crash_out_dec(struct crash_out *o, long long v)
{
	char b[24];
	int i = sizeof(b);
	unsigned long long u =
		v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	do
		b[--i] = (char)('0' + u % 10);
	while ((u /= 10) && i > 1);
	if (v < 0)
		b[--i] = '-';
	put(o, b + i, sizeof(b) - (size_t)i);
}

void crash_out_hex(struct crash_out *o, uint64_t v, int width)
{
	static const char hex[] = "0123456789abcdef";
	char b[18];
	int i = sizeof(b);

	do {
		b[--i] = hex[v & 15];
		v >>= 4;
	} while ((v || (int)sizeof(b) - i < width) && i > 2);
	b[--i] = 'x';
	b[--i] = '0';
	put(o, b + i, sizeof(b) - (size_t)i);
}

/* Two digits (or more) of v into p; returns p past them. */
static char *digits(char *p, long v, int width)
{
	char b[20];
	int i = sizeof(b);

	do
		b[--i] = (char)('0' + v % 10);
	while ((v /= 10) || (int)sizeof(b) - i < width);
	memcpy(p, b + i, sizeof(b) - (size_t)i);
	return p + sizeof(b) - i;
}

void crash_time_format(int64_t sec, int ms, char *out)
{
	/* Days to a civil date (Howard Hinnant's algorithm): no gmtime_r,
	 * which may take the time zone lock. */
	int64_t days = sec >= 0 ? sec / 86400 : (sec - 86399) / 86400;
	int64_t rem = sec - days * 86400, z = days + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t y = yoe + era * 400,
		doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	int64_t d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
	char *p = out;

	y += m <= 2;
	p = digits(p, (long)y, 4);
	*p++ = '-';
	p = digits(p, (long)m, 2);
	*p++ = '-';
	p = digits(p, (long)d, 2);
	*p++ = 'T';
	p = digits(p, (long)(rem / 3600), 2);
	*p++ = ':';
	p = digits(p, (long)(rem / 60 % 60), 2);
	*p++ = ':';
	p = digits(p, (long)(rem % 60), 2);
	*p++ = '.';
	p = digits(p, ms, 3);
	*p++ = 'Z';
	*p = '\0';
}

const char *crash_signal_name(int sig)
{
	switch (sig) {
	case SIGSEGV:
		return "SIGSEGV";
	case SIGBUS:
		return "SIGBUS";
	case SIGFPE:
		return "SIGFPE";
	case SIGILL:
		return "SIGILL";
	case SIGABRT:
		return "SIGABRT";
	case SIGTRAP:
		return "SIGTRAP";
	case SIGSYS:
		return "SIGSYS";
	default:
		return NULL;
	}
}

const char *crash_code_name(int sig, int code)
{
	static const char *const segv[] = {"SEGV_MAPERR", "SEGV_ACCERR",
					   "SEGV_BNDERR", "SEGV_PKUERR"};
	static const char *const bus[] = {"BUS_ADRALN", "BUS_ADRERR",
					  "BUS_OBJERR", "BUS_MCEERR_AR",
					  "BUS_MCEERR_AO"};
	static const char *const fpe[] = {
		"FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF",
		"FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV", "FPE_FLTSUB"};
	static const char *const ill[] = {
		"ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP",
		"ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC", "ILL_BADSTK"};

	switch (code) {
	case SI_USER:
		return "SI_USER";
	case SI_KERNEL:
		return "SI_KERNEL";
	case SI_QUEUE:
		return "SI_QUEUE";
	case SI_TKILL:
		return "SI_TKILL";
	}
	if (code < 1)
		return NULL;
#define PICK(arr)                                                              \
	return (size_t)code <= sizeof(arr) / sizeof(arr[0]) ? arr[code - 1]    \
							    : NULL
	switch (sig) {
	case SIGSEGV:
		PICK(segv);
	case SIGBUS:
		PICK(bus);
	case SIGFPE:
		PICK(fpe);
	case SIGILL:
		PICK(ill);
	}
#undef PICK
	return NULL;
}

/* Reads at most cap - 1 bytes of path into buf; returns the length. */
static size_t read_file(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0;

	buf[0] = '\0';
	if (fd < 0)
		return 0;
	while (n + 1 < cap) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	return n;
}

void crash_report_key(struct crash_out *o, const char *key, const char *value)
{
	crash_out_str(o, key);
	crash_out_str(o, ": ");
	crash_out_esc(o, value);
	crash_out_str(o, "\n");
}

void crash_report_key_int(struct crash_out *o, const char *key, long long v)
{
	crash_out_str(o, key);
	crash_out_str(o, ": ");
	crash_out_dec(o, v);
	crash_out_str(o, "\n");
}

void crash_report_head(struct crash_out *o, const char *kind,
		       const char *reason)
{
	char buf[CMDLINE_MAX + 1], when[32];
	struct timespec ts;
	ssize_t n;
	size_t k;

	crash_report_key_int(o, "probing-report", CRASH_REPORT_VERSION);
	crash_report_key(o, "kind", kind);
	crash_report_key(o, "reason", reason);
	crash_report_key_int(o, "pid", (long long)getpid());
	clock_gettime(CLOCK_REALTIME, &ts);
	crash_time_format((int64_t)ts.tv_sec, (int)(ts.tv_nsec / 1000000),
			  when);
	crash_report_key(o, "time", when);
	n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	crash_report_key(o, "executable", buf);
	k = read_file("/proc/self/cmdline", buf, sizeof(buf));
	while (k && buf[k - 1] == '\0')
		k--;
	for (size_t i = 0; i < k; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[k] = '\0';
	crash_report_key(o, "cmdline", buf);
}

void crash_report_body(struct crash_out *o)
{
	crash_out_str(o, "\n");
}

void crash_report_thread(struct crash_out *o, long tid, uint64_t ident,
			 const char *name, const char *flags)
{
	char path[64] = "/proc/self/task/", comm[64] = "";
	char *p = path + strlen(path);
	size_t n;

	crash_out_str(o, "thread ");
	crash_out_dec(o, tid);
	crash_out_str(o, " ident ");
	crash_out_hex(o, ident, 1);
	crash_out_str(o, " name \"");
	if (!name && tid <= 0) {
		name = ""; /* no kernel id: no name to read */
	} else if (!name) {
		long v = tid;
		char d[24];
		int i = sizeof(d);

		do
			d[--i] = (char)('0' + v % 10);
		while ((v /= 10) && i > 0);
		memcpy(p, d + i, sizeof(d) - (size_t)i);
		memcpy(p + sizeof(d) - i, "/comm", 6);
		n = read_file(path, comm, sizeof(comm));
		while (n && comm[n - 1] == '\n')
			comm[--n] = '\0';
		name = comm;
	}
	/* A quote in a name would end it early for a reader. */
	for (; *name; name++) {
		char c[2] = {*name == '"' ? '\'' : *name, 0};
		crash_out_esc(o, c);
	}
	crash_out_str(o, "\"");
	if (flags && *flags) {
		crash_out_str(o, " ");
		crash_out_str(o, flags);
	}
	crash_out_str(o, "\n");
}

void crash_report_python(struct crash_out *o, const char *label)
{
	crash_out_str(o, "  python (");
	crash_out_str(o, label ? label : "most recent call first");
	crash_out_str(o, "):\n");
}

void crash_report_frame(struct crash_out *o, const char *func, const char *file,
			int lineno)
{
	crash_out_str(o, "    File \"");
	crash_out_esc(o, file);
	crash_out_str(o, "\", line ");
	crash_out_dec(o, lineno);
	crash_out_str(o, ", in ");
	crash_out_esc(o, func);
	crash_out_str(o, "\n");
}

void crash_report_note(struct crash_out *o, const char *note)
{
	crash_out_str(o, "    (");
	crash_out_esc(o, note);
	crash_out_str(o, ")\n");
}

void crash_report_native(struct crash_out *o, struct crash_sym_cache *cache,
			 const uintptr_t *ips, size_t n, int first_is_pc,
			 int truncated)
{
	struct crash_sym s;

	crash_out_str(o, "  native (most recent call first):\n");
	if (!n)
		crash_report_note(o, "no native frames");
	for (size_t i = 0; i < n; i++) {
		int ret = !(i == 0 && first_is_pc);

		crash_out_str(o, "    #");
		crash_out_dec(o, (long long)i);
		crash_out_str(o, " ");
		crash_out_hex(o, ips[i], 16);
		/* Each line is flushed before the next lookup: a lookup that
		 * faults leaves every frame before it written. */
		crash_out_flush(o);
		if (crash_sym_lookup(cache, ips[i], ret, &s)) {
			crash_out_str(o, "\n");
			continue;
		}
		crash_out_str(o, " ");
		if (s.func[0]) {
			crash_out_esc(o, s.func);
			crash_out_str(o, "+");
			crash_out_hex(o, s.func_off, 1);
		} else {
			crash_out_str(o, "??");
		}
		crash_out_str(o, " (");
		crash_out_esc(o, s.object);
		crash_out_str(o, "+");
		crash_out_hex(o, ret ? s.obj_off + 1 : s.obj_off, 1);
		crash_out_str(o, ")\n");
	}
	if (truncated)
		crash_report_note(o, "more native frames not shown");
	crash_out_flush(o);
}

void crash_report_thread_end(struct crash_out *o)
{
	crash_out_str(o, "\n");
	crash_out_flush(o);
}

void crash_report_end(struct crash_out *o)
{
	crash_out_str(o, "end: complete\n");
	crash_out_flush(o);
}
