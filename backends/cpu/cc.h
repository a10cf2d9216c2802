/* backends/cpu/cc.h: running the system C compiler and loading its output.
 *
 * The compiler command is $CC when set and non-empty, else "cc"; it may hold
 * several words ("ccache gcc"), split on blanks (no quoting). The compiler
 * runs as a child process (fork + execve, no shell) in a process group of
 * its own, with stdin from /dev/null and stdout + stderr captured in a file;
 * it is killed (SIGKILL) when the thread that started it dies
 * (PR_SET_PDEATHSIG), and its whole process group is killed when it runs
 * past its time limit. Messages are graph_malloc'd (NULL only when even that
 * allocation failed); every out-parameter for a message may itself be NULL.
 *
 * Threads: cc_probe and cc_compile may run on several threads at once (the
 * CPU backend compiles a program's units in parallel): each compile has its
 * own temp folder and files, every descriptor is opened close-on-exec (a
 * child started by one thread keeps none of another's), the signal mask is
 * per thread, and the stale-folder sweep runs once (pthread_once).
 *
 * Time limits: timeout_s > 0 is the limit in seconds (INFINITY: none); 0,
 * a negative value or NaN means LF_COMPILE_TIMEOUT_DEFAULT (lazyfuse.h).
 */
#ifndef LF_CPU_CC_H
#define LF_CPU_CC_H

#include "backends/diskcache.h"

#include <stdbool.h>
#include <stddef.h>

/* The longest message cc_compile returns, NUL included: short enough that
 * it fits whole in lf_errmsg behind an "eval: compiling kernel N failed: ". */
enum { CC_MSG_MAX = 1536 };

/* What cc_probe and cc_compile return besides 0 and -1 (the compiler does
 * not work or failed): the temp folder cannot be used for a compile. It is
 * missing or not writable, or has no room: a write failed with ENOSPC or
 * EDQUOT ("disk full at '<$TMPDIR>': ..." in the message) or EFBIG ("file
 * size limit reached at ..."), the compiler was killed by SIGXFSZ, or it
 * failed and then CC_ROOM bytes no longer fit in the temp folder. A fact
 * about the machine, not the compiler: the CPU backend falls back to the
 * interpreter on it in LF_COMPILE_AUTO, and probes again later. */
enum { CC_NO_TMP = -2 };

/* Bytes of room the probe asks of $TMPDIR (written, then dropped), and that
 * a failed compile's folder is checked for: a unit's k.c, the compiler's
 * temp files and k.so need a few hundred KiB at most. */
enum { CC_ROOM = 1 << 20 };

/* The largest object cc_compile reads and cc_dlopen_bytes loads: the disk
 * cache's entry bound. A compiler that writes a larger k.so failed (-1),
 * refused from the file's size, never read. */
#define CC_MAX_OBJECT DISKCACHE_MAX_ENTRY

/* Probes the compiler by running `<cc words> --version`. Returns 0 and
 * *version = the first output line (graph_malloc'd, possibly empty), or -1
 * and *why = a one-line reason ("C compiler 'false' failed: exit status 1",
 * "C compiler 'nosuchcc' not found", "C compiler 'x' --version did not finish
 * within 120 s (killed)"); or CC_NO_TMP and *why when the temp file in
 * $TMPDIR cannot be created or CC_ROOM bytes written into it (they are
 * written first, then dropped, and the --version output goes there). */
int cc_probe(double timeout_s, char **version, char **why);

/* Compiles `source` (C text) into a shared object in a private temp folder
 * (mkdtemp of $TMPDIR/lazyfuse-cc-<pid>-<tag>-XXXXXX, or under /tmp; <tag>
 * names the host and pid namespace, 8 hex digits): writes k.c, runs
 * `<cc words> <flags...> -o <tmp>/k.so <tmp>/k.c <libs...>` with TMPDIR set
 * to that folder (so the compiler's own temp files land there too), waits at
 * most timeout_s. On exit status 0 and a readable k.so of at most
 * CC_MAX_OBJECT bytes: returns 0 with *so / *len = the .so bytes
 * (graph_malloc'd). Else returns CC_NO_TMP (see there) or -1 with *log = a
 * message of at most CC_MSG_MAX bytes: "C compiler failed (exit status N):
 * <log summary>", "the C compiler did not finish within N s (killed; ...)"
 * [": <log summary>"], or a reason the compiler could not run. The log
 * summary is the log made printable (bytes other than printable ASCII, tab
 * and valid UTF-8 from U+00A0 up are written \xNN; a CR ending a line is
 * dropped; the temp folder's "<dir>/" is removed): its first 20 lines (1000
 * bytes at most, a longer line cut with "[...]"), the first line containing
 * "error" (any case) when it is not among them, and "(N more lines; set
 * LF_DEBUG=cc for the full log)"; with LF_DEBUG=cc the whole log is also
 * copied to stderr. Always removes the temp folder and everything in it.
 * The first call in a process also removes stale folders of the same
 * naming under the same $TMPDIR: those whose <pid> is dead (kill(pid, 0)
 * fails with ESRCH) and whose <tag> is this one's, if they are folders (not
 * symlinks) owned by the effective uid. flags and libs are NULL-terminated
 * arrays (either may be NULL for none). */
int cc_compile(const char *source, const char *const *flags, const char *const *libs, double timeout_s,
               void **so, size_t *len, char **log);

/* cc_compile with an object to link in: when obj is not NULL, its obj_len
 * bytes are written to <tmp>/p.o and that path follows k.c on the command
 * line (the CPU backend's lf_random_normal object, cpu.c). A failed write
 * of it is CC_NO_TMP, like k.c's. */
int cc_compile_with(const char *source, const void *obj, size_t obj_len, const char *const *flags,
                    const char *const *libs, double timeout_s, void **so, size_t *len, char **log);

/* Loads a shared object held in memory (memfd + dlopen of /proc/self/fd/N
 * with RTLD_NOW | RTLD_LOCAL; a temp file unlinked after dlopen when memfd or
 * /proc is unavailable). Each call yields a distinct object even while an
 * earlier one is still loaded. Returns the dlopen handle (dlclose it), or
 * NULL with *why (includes dlerror()). */
void *cc_dlopen_bytes(const void *so, size_t len, char **why);

/* Test hook: when on, waits for the compiler by polling waitpid (the path
 * taken where pidfd_open is missing) instead of polling a pidfd. */
void cc_debug_poll_wait(bool on);

#endif
