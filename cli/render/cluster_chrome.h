/*
 * cluster_chrome: `probing cluster flamegraph -o FILE.json` — a Chrome
 * trace is a timeline, which folded stacks cannot give: each rank's agent
 * renders its own trace of the recording (probing/flamegraph format
 * chrome, common/flamegraph_json.c), and they are joined here into one,
 * a process per rank, all on one clock.
 *
 * Cap: CLUSTER_CHROME_MAX bytes of joined trace (each rank's is at most
 * FLAMEGRAPH_OUTPUT_MAX).  Pure; single-threaded.
 */
#ifndef CLI_CLUSTER_CHROME_H
#define CLI_CLUSTER_CHROME_H

#include <stddef.h>
#include <stdint.h>

#define CLUSTER_CHROME_MAX (512u << 20)

/*
 * Joins n Chrome traces (the text of each rank's, docs[i]; NULL: skipped)
 * into one: every event of rank ranks[i] keeps its pid and tid (a pid
 * an earlier rank has, on another host, becomes 2^30 + rank), its
 * process is named "rank N on H" (hosts[i]; the viewers add its pid;
 * "rank N on H, pid P" where the pid had to change) and sorted by
 * rank, and its times move onto the earliest trace's clock (by each
 * trace's otherData.startTime, Unix seconds: ranks line up as their
 * clocks do).  *out: a heap string the caller frees.  0, or -EINVAL (a
 * trace that does not parse: err names the rank), -ENOMEM, -E2BIG.
 */
int cluster_chrome_join(const int64_t *ranks, const char *const *hosts,
			const char *const *docs, size_t n, char **out,
			size_t *len, char *err, size_t errlen);

#endif
