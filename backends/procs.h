/* backends/procs.h: whose is a leftover file? Process liveness for the
 * sweeps that remove what a killed process left behind (a compiler's temp
 * folder, backends/cpu/cc.c; a kernel cache entry's temp and lock files,
 * backends/diskcache.c).
 *
 * A leftover's name carries its owner's pid and this host tag; a pid means
 * something only in the pid space where it was taken, and a temp folder or a
 * cache folder may be shared with other containers (whose live processes
 * kill() reports as ESRCH) or other hosts (an NFS home). So a leftover is
 * removed only when its tag is ours and its pid is dead here.
 */
#ifndef LF_PROCS_H
#define LF_PROCS_H

#include <stdbool.h>
#include <sys/types.h>

enum { PROCS_TAG_LEN = 8 };

/* This process's host tag: PROCS_TAG_LEN lowercase hex digits, a hash of the
 * boot id, the pid namespace and the host name. Thread-safe; computed once. */
const char *procs_host_tag(void);

/* Whether pid is not a live process in our pid space and is not us: kill(pid,
 * 0) fails with ESRCH (EPERM means alive, another user's). */
bool procs_dead_here(pid_t pid);

/* Parses "<pid>-<tag>-" at the start of s (a decimal pid > 0, no sign): the
 * text after the second '-', or NULL when s does not start so or the tag
 * is not ours. *pid gets the pid. */
const char *procs_parse_owner(const char *s, pid_t *pid);

#endif /* LF_PROCS_H */
