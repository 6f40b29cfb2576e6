/*
 * cluster_role: whether this process is the rank its environment names,
 * or a child of that rank (a DataLoader worker, a subprocess) that only
 * inherited RANK and the rest.
 *
 * A child of the rank must never register as the rank: it would replace
 * the rank's entry in the store, and `cluster backtrace` would then show
 * the worker instead of the rank that is stuck.  This process is taken
 * for a child of the rank when either
 *   1. it was forked from a process whose agent had read a job from its
 *      environment (cluster_role_forked(), from the agent's atfork
 *      handler): a forked child is never the rank; or
 *   2. its parent runs the same executable (same device and inode of
 *      /proc/PID/exe) and was started with the same job environment:
 *      RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
 *      GROUP_RANK, TORCHELASTIC_RUN_ID and TORCHELASTIC_RESTART_COUNT
 *      each present in both with the same value, or absent from both.
 *      torchrun and torch.distributed.launch give the ranks values their
 *      own environment does not have (LOCAL_RANK, TORCHELASTIC_*), and a
 *      shell wrapper between the launcher and Python is another
 *      executable, so a rank is never taken for its launcher's child.
 * What is not seen: a rank that put RANK into os.environ itself (as
 * torch.multiprocessing.spawn users do) and had no agent when it forked;
 * its children then register as the rank (the parent's starting
 * environment, /proc/PID/environ, does not have RANK).
 *
 * Reads /proc only; anything unreadable (another user's parent, a
 * hidden /proc) means "not a child": the rank registers as before.
 */
#ifndef CLUSTER_ROLE_H
#define CLUSTER_ROLE_H

#include <sys/types.h>

/* The child of the rank (1, with the rank's pid in *rank_pid: the
 * furthest ancestor that passes 2, or the pid given to
 * cluster_role_forked()) or not (0).  Reads getenv(): call it from
 * cluster_start(), as the agent starts. */
int cluster_role_child_of_rank(pid_t *rank_pid);

/* In a forked child of a process whose agent had read a job: rank_pid is
 * the rank that process was or descended from.  Async-signal-safe. */
void cluster_role_forked(pid_t rank_pid);

/* This process's workers: children of its main thread that run the same
 * executable (DataLoader workers, multiprocessing's forked children), and
 * the children of its multiprocessing forkserver (the workers it starts,
 * the default from 3.14) in place of the forkserver; multiprocessing's
 * resource tracker left out.  At most max into out, in pid order.  How
 * many. */
int cluster_role_workers(pid_t *out, int max);

#endif
