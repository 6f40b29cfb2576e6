/*
 * cmd_memory: the target's memory now (probing/memory): the process's
 * figures, Python objects by type, tensors by device and dtype, and
 * torch's CUDA allocator, and each GPU as NVML saw it (or why not).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

#define MEMORY_TOP_DEFAULT 15
#define MEMORY_TOP_LIMIT 1000
#define MEMORY_GRACE_MS 5000 /* on top of the walk's budget */

static double num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* Bytes for people: "512 B", "1.5 KiB", "12.3 MiB", "2.00 GiB". */
static void human(double b, char *out, size_t len)
{
	if (b < 1024)
		snprintf(out, len, "%.0f B", b);
	else if (b < 1024 * 1024)
		snprintf(out, len, "%.1f KiB", b / 1024);
	else if (b < 1024.0 * 1024 * 1024)
		snprintf(out, len, "%.1f MiB", b / (1024 * 1024));
	else
		snprintf(out, len, "%.2f GiB", b / (1024.0 * 1024 * 1024));
}

static void section(const char *title, int *first)
{
	printf("%s%s\n", *first ? "" : "\n", title);
	*first = 0;
}

static void types_table(const cJSON *arr, enum cli_format fmt)
{
	static const char *const cols[] = {"type", "count", "bytes"};
	struct cli_table *t = cli_table_new(3, cols);
	const cJSON *e;

	if (!t)
		return;
	cli_table_upper_header(t);
	cli_table_align_right(t, 1);
	cli_table_align_right(t, 2);
	cJSON_ArrayForEach(e, arr)
	{
		char c[32], b[32];
		const char *row[3] = {str(e, "type"), c, b};
		snprintf(c, sizeof(c), "%.0f", num(e, "count"));
		human(num(e, "bytes"), b, sizeof(b));
		cli_table_add(t, row);
	}
	cli_table_print(t, stdout, fmt, cli_isatty(stdout));
	cli_table_free(t);
}

static void tensors_table(const cJSON *arr, enum cli_format fmt)
{
	static const char *const cols[] = {"device", "dtype", "count", "bytes"};
	struct cli_table *t = cli_table_new(4, cols);
	const cJSON *e;

	if (!t)
		return;
	cli_table_upper_header(t);
	cli_table_align_right(t, 2);
	cli_table_align_right(t, 3);
	cJSON_ArrayForEach(e, arr)
	{
		char c[32], b[32];
		const char *row[4] = {str(e, "device"), str(e, "dtype"), c, b};
		snprintf(c, sizeof(c), "%.0f", num(e, "count"));
		human(num(e, "bytes"), b, sizeof(b));
		cli_table_add(t, row);
	}
	cli_table_print(t, stdout, fmt, cli_isatty(stdout));
	cli_table_free(t);
}

static void cuda_table(const cJSON *arr, enum cli_format fmt)
{
	static const char *const cols[] = {"device", "allocated",
					   "max_allocated", "reserved",
					   "max_reserved"};
	static const char *const keys[] = {"allocated", "maxAllocated",
					   "reserved", "maxReserved"};
	struct cli_table *t = cli_table_new(5, cols);
	const cJSON *e;

	if (!t)
		return;
	cli_table_upper_header(t);
	cJSON_ArrayForEach(e, arr)
	{
		char v[5][32];
		const char *row[5];
		snprintf(v[0], sizeof(v[0]), "cuda:%.0f", num(e, "device"));
		for (int i = 0; i < 4; i++)
			human(num(e, keys[i]) * 1048576.0, v[i + 1],
			      sizeof(v[i + 1]));
		for (int i = 0; i < 5; i++)
			row[i] = v[i];
		cli_table_add(t, row);
	}
	cli_table_print(t, stdout, fmt, cli_isatty(stdout));
	cli_table_free(t);
}

/* A number of o, or "-" where the agent says null (NVML did not say). */
static const char *numstr(const cJSON *o, const char *key, const char *f,
			  char *out, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(v))
		return "-";
	snprintf(out, len, f, v->valuedouble);
	return out;
}

/* MB of o as bytes for people, or "-" where the agent says null. */
static const char *mbstr(const cJSON *o, const char *key, char *out, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(v))
		return "-";
	human(v->valuedouble * 1048576.0, out, len);
	return out;
}

/* Each GPU: NVML's figures (gpu.utilization's last row). */
static void gpu_table(const cJSON *arr, enum cli_format fmt)
{
	static const char *const cols[] = {
		"device",    "name",	     "util",  "mem_util", "used",
		"total",     "this_process", "power", "temp",	  "sm_clock",
		"mem_clock", "throttle",     "xid"};
	enum { N = sizeof(cols) / sizeof(cols[0]) };
	struct cli_table *t = cli_table_new(N, cols);
	const cJSON *e;

	if (!t)
		return;
	cli_table_upper_header(t);
	for (int i = 2; i < 11; i++)
		cli_table_align_right(t, i);
	cJSON_ArrayForEach(e, arr)
	{
		char v[N][48], xid[64];
		const char *row[N];
		const cJSON *th =
			cJSON_GetObjectItemCaseSensitive(e, "throttle");
		const cJSON *x =
			cJSON_GetObjectItemCaseSensitive(e, "xidCount");
		const cJSON *lx =
			cJSON_GetObjectItemCaseSensitive(e, "lastXid");

		snprintf(v[0], sizeof(v[0]), "%.0f", num(e, "index"));
		row[0] = v[0];
		row[1] = str(e, "name");
		row[2] = numstr(e, "gpuUtil", "%.0f%%", v[2], sizeof(v[2]));
		row[3] = numstr(e, "memUtil", "%.0f%%", v[3], sizeof(v[3]));
		row[4] = mbstr(e, "memoryUsed", v[4], sizeof(v[4]));
		row[5] = mbstr(e, "memoryTotal", v[5], sizeof(v[5]));
		row[6] = mbstr(e, "processMemory", v[6], sizeof(v[6]));
		row[7] = numstr(e, "power", "%.0f W", v[7], sizeof(v[7]));
		row[8] = numstr(e, "temperature", "%.0f C", v[8], sizeof(v[8]));
		row[9] = numstr(e, "smClock", "%.0f MHz", v[9], sizeof(v[9]));
		row[10] =
			numstr(e, "memClock", "%.0f MHz", v[10], sizeof(v[10]));
		if (!cJSON_IsString(th))
			row[11] = "-";
		else
			row[11] = th->valuestring[0] ? th->valuestring : "none";
		if (!cJSON_IsNumber(x))
			snprintf(xid, sizeof(xid), "-");
		else if (x->valuedouble > 0 && cJSON_IsNumber(lx))
			snprintf(xid, sizeof(xid), "%.0f (last %.0f)",
				 x->valuedouble, lx->valuedouble);
		else
			snprintf(xid, sizeof(xid), "%.0f", x->valuedouble);
		row[12] = xid;
		cli_table_add(t, row);
	}
	cli_table_print(t, stdout, fmt, cli_isatty(stdout));
	cli_table_free(t);
}

/* The GPU section: a table of the devices, or the one line that says why
 * there is none.  Nothing from an agent that does not send it. */
static void show_gpu(const cJSON *gpu, enum cli_format fmt, int *first)
{
	const cJSON *devs = cJSON_GetObjectItemCaseSensitive(gpu, "devices");

	if (!cJSON_IsObject(gpu))
		return;
	if (cJSON_GetArraySize(devs) > 0) {
		section("GPU (NVML)", first);
		gpu_table(devs, fmt);
	} else {
		printf("%s%s\n", *first ? "" : "\n",
		       str(gpu, "message")[0] ? str(gpu, "message")
					      : "GPU: no device");
		*first = 0;
	}
}

static int show(const cJSON *b, enum cli_format fmt)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(b, "process");
	const cJSON *py = cJSON_GetObjectItemCaseSensitive(b, "python");
	const cJSON *torch = cJSON_GetObjectItemCaseSensitive(b, "torch");
	char v[5][32];
	int first = 1;

	if (fmt == CLI_FORMAT_JSON) {
		char *text = cJSON_Print(b);

		printf("%s\n", text ? text : "{}");
		free(text);
		return CLI_OK;
	}
	if (cJSON_IsObject(p)) {
		human(num(p, "rss") * 1048576.0, v[0], sizeof(v[0]));
		human(num(p, "vms") * 1048576.0, v[1], sizeof(v[1]));
		human(num(p, "shared") * 1048576.0, v[2], sizeof(v[2]));
		human(num(p, "peak") * 1048576.0, v[3], sizeof(v[3]));
		human(num(p, "swap") * 1048576.0, v[4], sizeof(v[4]));
		section("Process", &first);
		printf("  rss %s, vms %s, shared %s, peak rss %s, swap %s, "
		       "%.0f threads\n",
		       v[0], v[1], v[2], v[3], v[4], num(p, "threads"));
	}
	show_gpu(cJSON_GetObjectItemCaseSensitive(b, "gpu"), fmt, &first);
	if (!cJSON_IsObject(py)) {
		fprintf(stderr, "probing: %s\n", str(b, "message"));
		return CLI_OK;
	}
	human(num(py, "bytes"), v[0], sizeof(v[0]));
	section("Python objects", &first);
	printf("  %.0f tracked by the garbage collector and %.0f they refer to,"
	       " %s (shallow sizes), %.0f ms%s\n",
	       num(py, "objects"), num(py, "untracked"), v[0],
	       num(py, "elapsedMs"),
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(py, "complete"))
		       ? ""
		       : " (incomplete: past the budget or a cap)");
	section("Top types by count", &first);
	types_table(cJSON_GetObjectItemCaseSensitive(py, "byCount"), fmt);
	section("Top types by size", &first);
	types_table(cJSON_GetObjectItemCaseSensitive(py, "bySize"), fmt);
	if (cJSON_IsObject(torch)) {
		const cJSON *cuda =
			cJSON_GetObjectItemCaseSensitive(torch, "cuda");
		section("Tensors", &first);
		tensors_table(
			cJSON_GetObjectItemCaseSensitive(torch, "tensors"),
			fmt);
		if (cJSON_GetArraySize(cuda) > 0) {
			section("CUDA allocator", &first);
			cuda_table(cuda, fmt);
		}
	}
	return CLI_OK;
}

static int cmd_memory_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"top", required_argument, NULL, 'n'},
		{"budget", required_argument, NULL, 'b'},
		{"format", required_argument, NULL, 'f'},
		{NULL, 0, NULL, 0},
	};
	enum cli_format fmt = ctx->format;
	struct dap_message *resp = NULL;
	int c, rc, top = MEMORY_TOP_DEFAULT, budget = 0, wait;
	cJSON *args;

	while ((c = getopt_long(argc, argv, ":n:f:", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (cli_parse_ms(optarg, &top) < 0 ||
			    top > MEMORY_TOP_LIMIT)
				return cli_usage_error(&cmd_memory_entry,
						       "--top must be in [1, "
						       "%d]",
						       MEMORY_TOP_LIMIT);
			break;
		case 'b':
			if (cli_parse_duration(optarg, 1, &budget) < 0 ||
			    budget < 10 || budget > 60000)
				return cli_usage_error(&cmd_memory_entry,
						       "--budget must be 10ms "
						       "to 60s (a bare number: "
						       "milliseconds)");
			break;
		case 'f':
			if (cli_format_parse(optarg, &fmt))
				return CLI_EUSAGE;
			break;
		default:
			return cli_option_error(&cmd_memory_entry, c, argc,
						argv);
		}
	}
	if (cli_args_done(&cmd_memory_entry, argc, argv) != CLI_OK)
		return CLI_EUSAGE;
	if (fmt == CLI_FORMAT_CSV)
		return cli_usage_error(&cmd_memory_entry,
				       "-f csv is not supported here (several "
				       "tables): use table or json, or "
				       "'probing query' on process.memory and "
				       "python.tensors");
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK)
		return rc;
	args = cJSON_CreateObject();
	cJSON_AddNumberToObject(args, "top", top);
	if (budget)
		cJSON_AddNumberToObject(args, "budgetMs", budget);
	/* The walk may take its whole budget (60 s at most) plus the GIL. */
	wait = ctx->timeout_given ? ctx->timeout_ms
				  : (budget ? budget : 2000) + MEMORY_GRACE_MS +
					    ctx->timeout_ms;
	rc = cli_request(ctx, "probing/memory", args, wait, &resp);
	if (rc != CLI_OK)
		return rc;
	if (!resp->success)
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(resp));
	else
		rc = show(resp->body, fmt);
	dap_message_free(resp);
	return rc;
}

const struct cmd_entry cmd_memory_entry = {
	.name = "memory",
	.alias = "mem",
	.usage = "[--top N] [--budget MS] [-f table|json]",
	.summary = "Show the process's memory: RSS, Python objects, tensors",
	.help = "Shows, now:\n"
		"  - the process: resident set (rss), virtual size (vms), "
		"shared pages,\n"
		"    the peak resident set and swap, from /proc;\n"
		"  - Python objects by type, the top N by count and by size "
		"(a walk of\n"
		"    the heap with the GIL held, bounded by --budget; sizes "
		"are shallow,\n"
		"    as sys.getsizeof);\n"
		"  - torch tensors by device and dtype (count, bytes), and "
		"torch's CUDA\n"
		"    allocator (allocated, reserved and their peaks) when "
		"CUDA is in use;\n"
		"  - each NVIDIA GPU as NVML last saw it (gpu.interval_ms): "
		"utilization,\n"
		"    memory used and total, this process's memory on it, "
		"power,\n"
		"    temperature, clocks, throttle reasons, Xid errors; or one "
		"line that\n"
		"    says why there is none (no driver library, no device).\n"
		"When the GIL does not come in time, only the process's "
		"figures are shown.\n"
		"The same figures over time: 'probing query \"SELECT * FROM "
		"process.memory\"'\n"
		"and gpu.utilization; tensor by tensor: python.tensors.\n"
		"\n"
		"Options:\n"
		"  -n, --top N        types in each list (default 15)\n"
		"      --budget MS    time the walk may hold the GIL (default: "
		"the agent's\n"
		"                     memory.budget_ms, 2000)\n"
		"  -f, --format F     table (default) or json\n"
		"\n"
		"Example:\n"
		"  probing -t 1234 memory --top 5\n",
	.flags = CMD_TARGET | CMD_RECORDED | CMD_PAGED,
	.exec = cmd_memory_exec,
};
