/* Unit tests for dap/dap_addr: every text form, errors, sockaddrs. */
#include "test.h"

#include "dap_addr.h"

#include <errno.h>
#include <stddef.h>
#include <sys/un.h>

static char err[128];

static int parse(const char *text, struct dap_addr *a)
{
	err[0] = '\0';
	return dap_addr_parse(text, a, err, sizeof(err));
}

static void expect_bad(const char *text, const char *why)
{
	struct dap_addr a;

	CHECK(parse(text, &a) == -EINVAL);
	CHECK(err[0] != '\0');
	if (why && !strstr(err, why)) {
		fprintf(stderr, "'%s': '%s' lacks '%s'\n", text, err, why);
		CHECK(0);
	}
}

static void expect_fmt(const struct dap_addr *a, const char *want)
{
	char out[DAP_ADDR_TEXT_MAX + 16];

	dap_addr_format(a, out, sizeof(out));
	CHECK_STR(out, want);
}

static void test_pid(void)
{
	struct dap_addr a;

	CHECK(parse("1234", &a) == 0);
	CHECK(a.kind == DAP_ADDR_UNIX && a.pid == 1234);
	CHECK_STR(a.host, "@probing-1234");
	expect_fmt(&a, "@probing-1234");
	dap_addr_for_pid(77, &a);
	CHECK(a.kind == DAP_ADDR_UNIX && a.pid == 77 && a.port == 0);
	CHECK_STR(a.host, "@probing-77");
	expect_bad("0", "pid");
	expect_bad("99999999999", "pid");
	expect_bad("2147483648", "pid");
	CHECK(parse("2147483647", &a) == 0);
}

static void test_unix(void)
{
	struct dap_addr a;
	char name[200];

	CHECK(parse("@probing-x", &a) == 0);
	CHECK(a.kind == DAP_ADDR_UNIX && a.pid == 0);
	CHECK_STR(a.host, "@probing-x");
	expect_fmt(&a, "@probing-x");
	CHECK(parse("/run/probing.sock", &a) == 0);
	CHECK(a.kind == DAP_ADDR_UNIX);
	CHECK_STR(a.host, "/run/probing.sock");
	CHECK(parse("./rel.sock", &a) == 0 && a.kind == DAP_ADDR_UNIX);
	expect_bad("@", "empty");

	/* 107 name bytes fit an abstract address, 108 do not. */
	name[0] = '@';
	memset(name + 1, 'n', 107);
	name[108] = '\0';
	CHECK(parse(name, &a) == 0);
	name[108] = 'n';
	name[109] = '\0';
	expect_bad(name, "too long");

	/* A path needs its NUL inside sun_path: 107 bytes at most. */
	name[0] = '/';
	memset(name + 1, 'p', 106);
	name[107] = '\0';
	CHECK(parse(name, &a) == 0);
	name[107] = 'p';
	name[108] = '\0';
	expect_bad(name, "too long");
}

static void test_tcp(void)
{
	struct dap_addr a;

	CHECK(parse("127.0.0.1:9922", &a) == 0);
	CHECK(a.kind == DAP_ADDR_TCP && a.port == 9922 && a.pid == 0);
	CHECK_STR(a.host, "127.0.0.1");
	expect_fmt(&a, "127.0.0.1:9922");
	CHECK(parse("localhost:1", &a) == 0 && a.port == 1);
	CHECK_STR(a.host, "localhost");
	CHECK(parse("node-3.cluster:65535", &a) == 0 && a.port == 65535);
	CHECK(parse(":9922", &a) == 0 && a.kind == DAP_ADDR_TCP);
	CHECK_STR(a.host, "127.0.0.1");
	CHECK(parse("[::1]:9922", &a) == 0);
	CHECK(a.kind == DAP_ADDR_TCP && a.port == 9922);
	CHECK_STR(a.host, "::1");
	expect_fmt(&a, "[::1]:9922");
	CHECK(parse("[fe80::1%eth0]:80", &a) == 0);
	CHECK_STR(a.host, "fe80::1%eth0");

	expect_bad("localhost", "not an address");
	expect_bad("localhost:", "missing port");
	expect_bad("localhost:0", "port");
	expect_bad("localhost:65536", "port");
	expect_bad("localhost:99999999999999999999", "port");
	expect_bad("localhost:-1", "port");
	expect_bad("localhost:80x", "port");
	expect_bad("localhost: 80", "port");
	expect_bad("::1:9922", "brackets");
	expect_bad("[::1]", "missing port");
	expect_bad("[::1]9922", "missing port");
	expect_bad("[::1:9922", "']'");
	expect_bad("[]:9922", "host");
	expect_bad("bad host:80", "host");
	expect_bad("a@b:80", "host");
	expect_bad("a\tb:80", "host");
}

static void test_errors(void)
{
	struct dap_addr a;
	char big[DAP_ADDR_TEXT_MAX + 10];

	expect_bad("", "empty");
	CHECK(dap_addr_parse(NULL, &a, err, sizeof(err)) == -EINVAL);
	memset(big, 'h', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	expect_bad(big, "too long");
	/* err may be NULL. */
	CHECK(dap_addr_parse("nope", &a, NULL, 0) == -EINVAL);
	/* A failed parse leaves *out alone. */
	a.port = 4242;
	CHECK(parse("x:0", &a) == -EINVAL && a.port == 4242);
}

static void test_sockaddr(void)
{
	struct sockaddr_storage ss;
	struct sockaddr_un *sun = (struct sockaddr_un *)&ss;
	struct dap_addr a;
	socklen_t len = 0;

	dap_addr_for_pid(12, &a);
	CHECK(dap_addr_unix_sockaddr(&a, &ss, &len) == 0);
	CHECK(sun->sun_family == AF_UNIX);
	CHECK(sun->sun_path[0] == '\0');
	CHECK(memcmp(sun->sun_path + 1, "probing-12", 10) == 0);
	CHECK(len == offsetof(struct sockaddr_un, sun_path) + 1 + 10);

	CHECK(parse("/tmp/x.sock", &a) == 0);
	CHECK(dap_addr_unix_sockaddr(&a, &ss, &len) == 0);
	CHECK_STR(sun->sun_path, "/tmp/x.sock");
	CHECK(len == offsetof(struct sockaddr_un, sun_path) + 12);

	CHECK(parse("127.0.0.1:1", &a) == 0);
	CHECK(dap_addr_unix_sockaddr(&a, &ss, &len) == -EINVAL);

	/* Built by hand past what parse allows. */
	memset(&a, 0, sizeof(a));
	a.kind = DAP_ADDR_UNIX;
	memset(a.host, 'p', 200);
	a.host[0] = '/';
	CHECK(dap_addr_unix_sockaddr(&a, &ss, &len) == -ENAMETOOLONG);
	a.host[0] = '@';
	CHECK(dap_addr_unix_sockaddr(&a, &ss, &len) == -ENAMETOOLONG);
	memcpy(a.host, "@", 2);
	CHECK(dap_addr_unix_sockaddr(&a, &ss, &len) == -EINVAL);

	/* Formatting into a short buffer truncates, NUL-terminated. */
	char small[5];
	CHECK(parse("127.0.0.1:9922", &a) == 0);
	dap_addr_format(&a, small, sizeof(small));
	CHECK_STR(small, "127.");
}

static void test_node_line(void)
{
	const char *addr;
	long long rank;
	char l1[] = "  host-a:9922   3  # rank three\n", l2[] = "10.0.0.2:1\r\n",
	     l3[] = "   # only a comment\n", l4[] = "\n", l5[] = "a:1 2 3\n",
	     l6[] = "a:1 -1\n", l7[] = "a:1 x\n", l8[] = "a:1 99999999999999999999\n";

	CHECK(dap_addr_node_line(l1, &addr, &rank) == 1);
	CHECK_STR(addr, "host-a:9922");
	CHECK(rank == 3);
	CHECK(dap_addr_node_line(l2, &addr, &rank) == 1);
	CHECK_STR(addr, "10.0.0.2:1");
	CHECK(rank == -1);
	CHECK(dap_addr_node_line(l3, &addr, &rank) == 0);
	CHECK(dap_addr_node_line(l4, &addr, &rank) == 0);
	CHECK(dap_addr_node_line(l5, &addr, &rank) == -EINVAL);
	CHECK(dap_addr_node_line(l6, &addr, &rank) == -EINVAL);
	CHECK(dap_addr_node_line(l7, &addr, &rank) == -EINVAL);
	CHECK(dap_addr_node_line(l8, &addr, &rank) == -EINVAL);
}

TEST_MAIN(test_pid, test_unix, test_tcp, test_errors, test_sockaddr,
	  test_node_line)
