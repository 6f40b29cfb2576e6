/*
 * job: a torchrun job's processes as this machine shows them, from their
 * environments and parents alone (no agent asked).
 *
 * torchrun (torch.distributed.run) starts each rank as its own child with
 * RANK, WORLD_SIZE and LOCAL_RANK in its environment; the ranks' children
 * (DataLoader workers, a forkserver) inherit them.  So:
 *   a launcher  has ranks among its children: processes with RANK and
 *               LOCAL_RANK, a RANK other than its own where it has one
 *               (a scheduler's node rank);
 *   a child     has the RANK its parent has (a rank or its child);
 *   a rank      has RANK otherwise (its parent the launcher, or a shell
 *               for a rank started by hand).
 * /proc/PID/environ is the environment a process started with, readable
 * for our own user's processes (and root's for all): another user's
 * processes have no role here.
 */
#ifndef CLI_JOB_H
#define CLI_JOB_H

#include <sys/types.h>

/* Ranks of one launcher looked at, at most. */
#define CLI_JOB_RANKS_MAX 1024

enum cli_job_kind {
	CLI_JOB_NONE,	  /* not part of a torchrun job, or not ours */
	CLI_JOB_LAUNCHER, /* torchrun itself */
	CLI_JOB_RANK,
	CLI_JOB_CHILD, /* a child of a rank (a DataLoader worker) */
};

struct cli_job_rank {
	pid_t pid;
	int rank;
};

struct cli_job_role {
	enum cli_job_kind kind;
	int rank;	  /* RANK of a rank or a child; -1 */
	int world;	  /* WORLD_SIZE, or -1 when not set */
	pid_t parent;	  /* the launcher of a rank, the parent of a child */
	int nranks;	  /* a launcher's ranks */
	int first, last;  /* a launcher's lowest and highest RANK */
	pid_t first_pid;  /* ... and the pid of its lowest */
};

/* What pid is in a job.  Never fails: CLI_JOB_NONE when unknown. */
void cli_job_role(pid_t pid, struct cli_job_role *r);

/* A launcher's ranks, sorted by RANK, into out (max); their number. */
int cli_job_ranks(pid_t launcher, struct cli_job_rank *out, int max);

/* target, or where target is the pid of torchrun's launcher (whose own
 * agent is in no job) and its lowest rank has an agent, that rank's pid,
 * said on stderr with what is asked of it ("the job"). */
const char *cli_job_target(const char *target, const char *what);

#endif
