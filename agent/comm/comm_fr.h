/*
 * comm_fr: torch's own Flight Recorder, read (torch >= 2.5 where it is
 * built: `_dump_fr_trace_json`, or `_dump_nccl_trace_json` before it had
 * a name of its own).
 *
 * torch keeps the last TORCH_FR_BUFFER_SIZE (TORCH_NCCL_TRACE_BUFFER_SIZE
 * for NCCL) calls of every process group — those made in C++ too (DDP's
 * broadcasts, compiled graphs' collectives), with torch's own sequence
 * numbers and op names — when that variable is set before the process
 * group is made.  python.comm_flight_recorder shows it (comm.c), and
 * `cluster hang` names from it the call a rank that skipped a collective
 * is in.
 *
 * Threads: comm_fr_dump with the GIL held; comm_fr_rows on any thread.
 */
#ifndef COMM_FR_H
#define COMM_FR_H

#include <stddef.h>

struct livetab_rows;

/* Bytes of a dump read: its cJSON tree takes several times that, so a
 * recorder of some 16,000 calls at most (TORCH_FR_BUFFER_SIZE). */
#define COMM_FR_JSON_MAX ((size_t)8 << 20)

/* The columns of python.comm_flight_recorder. */
#define COMM_FR_COLUMNS                                                        \
	"record_id INTEGER, pg TEXT, pg_desc TEXT, seq INTEGER, p2p_seq "      \
	"INTEGER, op TEXT, backend TEXT, state TEXT, retired INTEGER, "       \
	"created REAL, started REAL, completed REAL, input_sizes TEXT, "       \
	"input_dtypes TEXT, thread_name TEXT, timeout_ms INTEGER"

/* torch's dump as JSON text (malloc'd, *json; NULL with 0 when this torch
 * has no Flight Recorder or torch.distributed is not imported: nothing
 * to show, no error).  0, or a negative error with err filled. */
int comm_fr_dump(char **json, char *err, size_t errlen);

/* The rows of dump json (comm_fr_dump's) into rows.  0, or a negative
 * error with err filled. */
int comm_fr_rows(const char *json, struct livetab_rows *rows, char *err,
		 size_t errlen);

#endif
