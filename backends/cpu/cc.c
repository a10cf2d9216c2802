/* backends/cpu/cc.c: the system C compiler as a subprocess, and loading the
 * shared objects it makes straight from memory.
 *
 * What must stay true:
 * - No shell: the compiler runs through vfork + execve of the file $PATH
 *   names for the first word of $CC (resolved before the vfork), with an
 *   argv of $CC's words (split on blanks) plus our arguments; stdin is
 *   /dev/null, stdout and stderr go to a file (not a pipe, so a compiler
 *   wrapper that leaves a daemon holding its output cannot hang us); signals
 *   are reset to default and unblocked in the child; waits survive EINTR.
 *   Between vfork and execve the child shares our memory and makes only
 *   raw system calls (async-signal-safe), on data prepared before (argv,
 *   envp, the path), writing nothing but its own stack frame; every signal
 *   is blocked across the vfork so no handler of the program runs in the
 *   child. Why vfork: posix_spawn cannot set PR_SET_PDEATHSIG (next
 *   point), and fork copies the page tables: measured 130 ms per compile
 *   in a process with 4 GiB resident (vfork: the same 1.4 ms as with
 *   nothing resident).
 * - The compiler cannot outlive its welcome: it runs in a process group of
 *   its own (setpgid in the child, before execve); past the time limit (timeout_s, see
 *   cc.h) the whole group is killed with SIGKILL and the compiler reaped;
 *   and it gets PR_SET_PDEATHSIG(SIGKILL), so that a program killed during
 *   a compile (kill -9) takes its compiler with it. PDEATHSIG reaches the
 *   compiler itself, not what it started (cc1, as, ld: they finish their
 *   step and exit, or are killed with the group on a timeout). Its own
 *   group also means a terminal's Ctrl-C reaches the program only; a
 *   program that dies of it takes the compiler along as above.
 * - cc_compile owns a private mkdtemp folder and removes it, and everything
 *   the compiler left in it, on every path. The compiler runs with TMPDIR
 *   set to it, so its own temp files are in it too. Its name carries the
 *   owner's pid and a host tag, so that the folder of a process killed
 *   during a compile is recognized and removed by the first compile of a
 *   later process (sweep_stale: dead pid, same tag, a folder owned by the
 *   effective uid; never a symlink, never another user's).
 * - A failed compile's message is printable and bounded (CC_MSG_MAX): the
 *   log's first lines and first error line, and a count of the rest
 *   (fail_msg); LF_DEBUG=cc copies the whole log to stderr.
 * - cc_dlopen_bytes gives every call a dlopen name never used before in this
 *   process. glibc returns an already loaded object when the name matches, so
 *   reusing "/proc/self/fd/N" after fd N was recycled would hand back the
 *   previous kernel; the name is made unique by a counter spelled as "./" and
 *   "//" path segments, which the kernel resolves to the same file.
 * - A temp folder that cannot be used (missing, not writable, or without
 *   CC_ROOM bytes of room) is CC_NO_TMP, never a compiler's failure: the
 *   probe writes CC_ROOM bytes into its temp file before running the
 *   compiler, a failed write of k.c or the log is CC_NO_TMP, and a compiler
 *   that fails is checked for room the same way (room_check, while its
 *   leftovers are still there) and is CC_NO_TMP when there is none, or when
 *   it was killed by SIGXFSZ. The message says "disk full at '<$TMPDIR>'"
 *   for ENOSPC and EDQUOT ("file size limit reached at" for EFBIG).
 * - What the compiler wrote is bounded before it is read: a k.so larger
 *   than CC_MAX_OBJECT (the disk cache's entry bound) is refused from its
 *   fstat, never read or loaded; cc_dlopen_bytes refuses one too.
 * - Every allocation goes through graph_malloc and is freed on every path.
 */
#include "backends/cpu/cc.h"
#include "backends/diskcache.h"
#include "backends/fileio.h"
#include "backends/procs.h"
#include "graph/graph.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3: ask for an executable memfd explicitly */
#endif

enum { PROBE_CAP = 4096 };

/* Hands msg to *out, or frees it when out is NULL. */
static void give(char **out, char *msg) {
    if (out) *out = msg;
    else graph_free(msg);
}

/* Reads fd from offset 0 into a NUL-terminated graph_malloc'd buffer of at
 * most cap bytes; *n = bytes read, *more = the file held more. NULL with
 * errno on failure. */
static char *read_from_start(int fd, size_t cap, size_t *n, bool *more) {
    struct stat st;
    if (fstat(fd, &st) != 0) return NULL;
    size_t want = (uint64_t)st.st_size < (uint64_t)cap ? (size_t)st.st_size : cap;
    *more = (uint64_t)st.st_size > (uint64_t)cap;
    char *buf = graph_malloc(want + 1);
    if (!buf) {
        errno = ENOMEM;
        return NULL;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t k = pread(fd, buf + got, want - got, (off_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int e = errno;
            graph_free(buf);
            errno = e;
            return NULL;
        }
        if (k == 0) break;
        got += (size_t)k;
    }
    buf[got] = '\0';
    *n = got;
    return buf;
}

static const char *tmp_base(void) {
    const char *t = getenv("TMPDIR");
    return t && t[0] ? t : "/tmp";
}

/* ---- room in the temp folder ----------------------------------------------- */

/* Whether errno value e says a write found no room: the file system is full
 * (ENOSPC), the user's quota is (EDQUOT), or the process's file size limit
 * (EFBIG, RLIMIT_FSIZE) is reached. */
static bool no_room(int e) { return e == ENOSPC || e == EDQUOT || e == EFBIG; }

/* The words a message about room errno e starts with, before "'<$TMPDIR>'". */
static const char *room_words(int e) { return e == EFBIG ? "file size limit reached at" : "disk full at"; }

/* Writes `bytes` zero bytes into fd from offset 0, then truncates it to 0
 * bytes again. Returns 0, or the errno of the write that failed. */
static int fill_and_empty(int fd, size_t bytes) {
    static const char zero[65536];
    int e = 0;
    for (size_t at = 0; at < bytes && !e;) {
        size_t n = bytes - at < sizeof zero ? bytes - at : sizeof zero;
        ssize_t k = pwrite(fd, zero, n, (off_t)at);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) e = k < 0 ? errno : ENOSPC;
        else at += (size_t)k;
    }
    if (ftruncate(fd, 0) != 0 && !e) e = errno;
    return e;
}

/* Whether folder dir has CC_ROOM bytes of room: writes them into a file of
 * its own there (removed before returning). Returns 0, or the errno that
 * said no (ENOMEM when the path could not be allocated). */
static int room_check(const char *dir) {
    char *path = graph_strdupf("%s/room-XXXXXX", dir);
    if (!path) return ENOMEM;
    int fd = mkostemp(path, O_CLOEXEC), e = fd < 0 ? errno : 0;
    if (fd >= 0) {
        unlink(path);
        e = fill_and_empty(fd, CC_ROOM);
        close(fd);
    }
    graph_free(path);
    return e;
}

/* "cannot <what> '<path>': <reason>", led by "disk full at '<$TMPDIR>': "
 * when errno value e says there was no room. */
static char *tmp_fail(int e, const char *what, const char *path) {
    if (no_room(e)) return graph_strdupf("%s '%s': cannot %s '%s': %s", room_words(e), tmp_base(), what, path, strerror(e));
    return graph_strdupf("cannot %s '%s': %s", what, path, strerror(e));
}

/* ---- the compiler command ------------------------------------------------- */

static const char *cc_command(void) {
    const char *cc = getenv("CC");
    if (!cc || !cc[strspn(cc, " \t")]) return "cc";
    return cc;
}

/* One allocation: argv pointers, then a copy of the command split in place.
 * argv = <cc words> flags... mid[0..nmid) libs... NULL. */
static char **build_argv(const char *cmd, const char *const *flags, const char *const *mid,
                         size_t nmid, const char *const *libs) {
    size_t nw = 0, nf = 0, nl = 0, clen = strlen(cmd);
    for (const char *p = cmd; *p;) {
        p += strspn(p, " \t");
        if (!*p) break;
        nw++;
        p += strcspn(p, " \t");
    }
    while (flags && flags[nf]) nf++;
    while (libs && libs[nl]) nl++;
    size_t nargs = nw + nf + nmid + nl + 1;
    char **argv = graph_malloc(nargs * sizeof(char *) + clen + 1);
    if (!argv) return NULL;
    char *copy = (char *)(argv + nargs);
    memcpy(copy, cmd, clen + 1);
    size_t k = 0;
    for (char *p = copy; *p;) {
        while (*p == ' ' || *p == '\t') *p++ = '\0';
        if (!*p) break;
        argv[k++] = p;
        p += strcspn(p, " \t");
    }
    for (size_t i = 0; i < nf; i++) argv[k++] = (char *)flags[i];
    for (size_t i = 0; i < nmid; i++) argv[k++] = (char *)mid[i];
    for (size_t i = 0; i < nl; i++) argv[k++] = (char *)libs[i];
    argv[k] = NULL;
    return argv;
}

/* Finds the file execve runs for argv0, as execvp would: argv0 itself when
 * it holds a '/', else the first executable regular file named argv0 in a
 * folder of $PATH (empty entries mean "."). Writes its path to full (cap
 * bytes); false when there is none. Resolved before the vfork: so that
 * "not found" is a plain ENOENT rather than a child's exit status, and
 * because execvp (which may allocate) is not safe between vfork and exec.
 * Allocates nothing. */
static bool find_program(const char *argv0, char *full, size_t cap) {
    size_t nl = strlen(argv0);
    if (strchr(argv0, '/')) {
        if (nl >= cap || access(argv0, X_OK) != 0) return false;
        memcpy(full, argv0, nl + 1);
        return true;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/bin:/usr/bin";
    for (const char *p = path;; p++) {
        size_t dl = strcspn(p, ":");
        if (dl + 2 + nl < cap) {
            memcpy(full, dl ? p : ".", dl ? dl : 1);
            size_t k = dl ? dl : 1;
            full[k] = '/';
            memcpy(full + k + 1, argv0, nl + 1);
            struct stat st;
            if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0) return true;
        }
        p += dl;
        if (!*p) return false;
    }
}

static atomic_bool poll_wait; /* cc_debug_poll_wait */

void cc_debug_poll_wait(bool on) { atomic_store(&poll_wait, on); }

/* What the child does between vfork and execve, all prepared before the
 * vfork: only raw system calls may run in between (the child shares the
 * parent's memory, and the parent may have other threads, whose locks the
 * child would find held). */
typedef struct child_plan {
    const char *path;               /* the file to execute (find_program) */
    char **argv, **envp;
    int outfd;                      /* becomes stdout and stderr */
    int errfd;                      /* write end of the exec-error pipe (CLOEXEC) */
    pid_t parent;                   /* getpid() of the parent */
    sigset_t none;                  /* the mask to exec with */
    struct sigaction dfl;           /* SIG_DFL */
} child_plan;

static _Noreturn void child_run(const child_plan *p) {
    int out = p->outfd, err = p->errfd, e;
    /* A group of its own, so a timeout can kill the compiler's children
     * with it. */
    if (setpgid(0, 0) != 0) goto fail;
    /* Die with the parent. PDEATHSIG fires when the thread that vforked
     * exits, not the process: that thread waits in run_wait until this
     * child is reaped, so it exits first only when the process dies (or the
     * thread is cancelled in the wait). If the parent died before prctl,
     * the signal will never come: getppid() no longer names it. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) goto fail;
    if (getppid() != p->parent) _exit(127);
    /* Handlers become SIG_DFL at exec anyway; ignored signals would not. */
    for (int s = 1; s < NSIG; s++) sigaction(s, &p->dfl, NULL); /* SIGKILL, SIGSTOP, libc's: EINVAL */
    if (err <= 2 && (err = fcntl(err, F_DUPFD_CLOEXEC, 3)) < 0) _exit(127);
    if (out <= 2 && (out = fcntl(out, F_DUPFD_CLOEXEC, 3)) < 0) goto fail;
    int nul = open("/dev/null", O_RDONLY);
    if (nul < 0) goto fail;
    if (nul != 0 && (dup2(nul, 0) < 0 || close(nul) != 0)) goto fail;
    if (dup2(out, 1) < 0 || dup2(out, 2) < 0) goto fail;
    if (sigprocmask(SIG_SETMASK, &p->none, NULL) != 0) goto fail;
    execve(p->path, p->argv, p->envp);
fail:
    e = errno;
    if (write(err, &e, sizeof e) < 0) _exit(127);
    _exit(127);
}

static atomic_bool no_pidfd; /* pidfd_open said ENOSYS or EPERM: not tried again */

static int sys_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
    if (atomic_load(&no_pidfd)) return -1;
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0 && (errno == ENOSYS || errno == EPERM)) atomic_store(&no_pidfd, true);
    return fd;
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* Waits for child pid until the monotonic time `end` (INFINITY: no end).
 * Returns 1 when it exited (reaped, *status set), 0 when the time ran out
 * (still running), or -1 with errno.
 *
 * How: poll() on a pidfd (Linux 5.3+), which becomes readable when the
 * child exits, then waitpid. It sleeps in the kernel, wakes at once, and
 * needs no SIGCHLD handler (a library must not install one; the program's
 * own is left alone). Where pidfd_open is missing (ENOSYS: older kernels,
 * valgrind before 3.19; EPERM: some seccomp filters) or poll fails: waitpid
 * with WNOHANG, sleeping 1 ms, doubling up to 50 ms, between tries: at most
 * 50 ms late and about 20 wakeups a second for a long compile. */
static int wait_until(pid_t pid, double end, int *status) {
    int pidfd = atomic_load(&poll_wait) ? -1 : sys_pidfd_open(pid);
    if (pidfd >= 0) {
        int ready = -1;
        for (;;) {
            double left = end - graph_now_seconds();
            if (left <= 0) {
                ready = 0;
                break;
            }
            int ms = isinf(left) ? -1 : left * 1000 >= INT_MAX - 1 ? INT_MAX - 1 : (int)ceil(left * 1000);
            struct pollfd q = {.fd = pidfd, .events = POLLIN};
            int k = poll(&q, 1, ms);
            if (k > 0) {
                ready = 1;
                break;
            }
            if (k < 0 && errno != EINTR) break; /* fall back to polling waitpid */
        }
        close(pidfd);
        if (ready == 0) return 0;
        if (ready == 1) {
            while (waitpid(pid, status, 0) < 0)
                if (errno != EINTR) return -1;
            return 1;
        }
    }
    long ns = 1000000;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) return 1;
        if (r < 0 && errno != EINTR) return -1;
        double left = end - graph_now_seconds();
        if (left <= 0) return 0;
        if (left * 1e9 < ns) ns = (long)(left * 1e9) + 1;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        ns = ns * 2 > 50000000 ? 50000000 : ns * 2;
    }
}

/* Runs argv[0] (the file `path`) with envp, stdin from /dev/null and stdout
 * + stderr into outfd, and waits at most timeout_s seconds (> 0; INFINITY:
 * no limit). When the time runs out, the child's whole process group is
 * killed with SIGKILL, the child reaped and *late set. Returns 0 with
 * *status (as from waitpid), or an errno value: from execve (the program
 * could not be started), vfork or waiting. */
static int run_wait(const char *path, char **argv, char **envp, int outfd, double timeout_s, int *status,
                    bool *late) {
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) return errno;
    child_plan plan = {.path = path, .argv = argv, .envp = envp, .outfd = outfd, .errfd = pfd[1],
                       .parent = getpid()};
    sigemptyset(&plan.none);
    plan.dfl.sa_handler = SIG_DFL;
    sigemptyset(&plan.dfl.sa_mask);
    double end = isinf(timeout_s) ? INFINITY : graph_now_seconds() + timeout_s;
    /* Block every signal across the vfork, so that none of the program's
     * handlers runs in the child (on our memory) before child_run resets
     * them. vfork returns here once the child has exec'd or exited. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = vfork();
    if (pid == 0) child_run(&plan);
    int fork_err = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        return fork_err;
    }
    int rc = 0, got = wait_until(pid, end, status);
    if (got < 0) rc = errno;
    if (got == 0) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL); /* in case it never made its group */
        while (waitpid(pid, status, 0) < 0) {
            if (errno != EINTR) break;
        }
        *late = true;
    }
    /* The child is gone, so the pipe's write end is closed everywhere: 0
     * bytes when execve succeeded, else the errno it failed with. */
    int exec_err = 0;
    ssize_t n;
    while ((n = read(pfd[0], &exec_err, sizeof exec_err)) < 0 && errno == EINTR) {
    }
    close(pfd[0]);
    if (rc == 0 && n == (ssize_t)sizeof exec_err && exec_err) rc = exec_err;
    return rc;
}

/* Resolves argv[0] and runs it (run_wait); ENOENT when there is no such
 * program. */
static int spawn_wait(char **argv, char **envp, int outfd, double timeout_s, int *status, bool *late) {
    char path[4096];
    *late = false;
    if (!find_program(argv[0], path, sizeof path)) return ENOENT;
    return run_wait(path, argv, envp, outfd, timeout_s, status, late);
}

static double limit_of(double timeout_s) {
    return timeout_s > 0 ? timeout_s : LF_COMPILE_TIMEOUT_DEFAULT; /* NaN too */
}

/* "exit status N" / "killed by signal N (NAME)" into buf. */
static const char *status_str(char *buf, size_t cap, int status) {
    if (WIFEXITED(status)) snprintf(buf, cap, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(buf, cap, "wait status %d", status);
    return buf;
}

static char *spawn_error(const char *cmd, int err) {
    if (err == ENOENT) return graph_strdupf("C compiler '%s' not found", cmd);
    return graph_strdupf("C compiler '%s' cannot be started: %s", cmd, strerror(err));
}

/* ---- probe ---------------------------------------------------------------- */

int cc_probe(double timeout_s, char **version, char **why) {
    const char *cmd = cc_command();
    double limit = limit_of(timeout_s);
    if (version) *version = NULL;
    if (why) *why = NULL;
    char *msg = NULL, *out = NULL, *tmpl = NULL;
    int fd = -1, rc = -1;
    char **argv = build_argv(cmd, NULL, (const char *const[]){"--version"}, 1, NULL);
    if (!argv || !(tmpl = graph_strdupf("%s/lazyfuse-probe-XXXXXX", tmp_base()))) goto done;
    if ((fd = mkostemp(tmpl, O_CLOEXEC)) < 0) {
        int e = errno;
        msg = no_room(e) ? graph_strdupf("%s '%s': cannot create a temp file: %s", room_words(e), tmp_base(), strerror(e))
                         : graph_strdupf("cannot create a temp file in '%s': %s", tmp_base(), strerror(e));
        rc = CC_NO_TMP;
        goto done;
    }
    unlink(tmpl); /* the fd is all we need */
    int room = fill_and_empty(fd, CC_ROOM); /* a compile needs room: a full disk is no place for one */
    if (room) {
        msg = no_room(room) ? graph_strdupf("%s '%s': no room for a compile (%d KiB): %s", room_words(room), tmp_base(),
                                            CC_ROOM >> 10, strerror(room))
                            : graph_strdupf("cannot write a temp file in '%s': %s", tmp_base(), strerror(room));
        rc = CC_NO_TMP;
        goto done;
    }
    int status;
    bool late;
    int err = spawn_wait(argv, environ, fd, limit, &status, &late);
    if (err) {
        msg = spawn_error(cmd, err);
        goto done;
    }
    if (late) {
        msg = graph_strdupf("C compiler '%s' --version did not finish within %g s (killed)", cmd, limit);
        goto done;
    }
    size_t n;
    bool more;
    if (!(out = read_from_start(fd, PROBE_CAP, &n, &more))) {
        if (errno != ENOMEM)
            msg = graph_strdupf("C compiler '%s': cannot read its output: %s", cmd, strerror(errno));
        goto done;
    }
    out[strcspn(out, "\r\n")] = '\0'; /* first line */
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char sb[64];
        msg = out[0] ? graph_strdupf("C compiler '%s' failed: %s: %s", cmd, status_str(sb, sizeof sb, status), out)
                     : graph_strdupf("C compiler '%s' failed: %s", cmd, status_str(sb, sizeof sb, status));
        goto done;
    }
    rc = 0;
    give(version, out);
    out = NULL;
done:
    if (fd >= 0) close(fd);
    graph_free(out);
    graph_free(tmpl);
    graph_free(argv);
    give(why, msg);
    return rc;
}

/* ---- removing folders ------------------------------------------------------ */

/* Removes everything in the open folder fd (depth-bounded) and closes fd. */
static void remove_tree(int fd, int depth) {
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
        if (unlinkat(dirfd(d), name, 0) == 0 || (errno != EISDIR && errno != EPERM)) continue;
        int sub = depth < 16 ? openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (sub >= 0) remove_tree(sub, depth + 1);
        unlinkat(dirfd(d), name, AT_REMOVEDIR);
    }
    closedir(d);
}

/* Removes name (relative to folder fd parent) and, when it is a folder,
 * everything under it (depth-bounded). Never follows a symlink (one is
 * removed itself). Allocates nothing from graph_malloc, so cleanup works
 * when memory has run out. */
static void remove_at(int parent, const char *name) {
    if (unlinkat(parent, name, 0) == 0 || (errno != EISDIR && errno != EPERM)) return;
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) remove_tree(fd, 1);
    unlinkat(parent, name, AT_REMOVEDIR);
}

/* ---- stale temp folders ------------------------------------------------------ */

/* A compile's folder is $TMPDIR/lazyfuse-cc-<pid>-<tag>-XXXXXX: the pid says
 * whose it is, the host tag (backends/procs.h) in which pid space that pid
 * means anything. */
static pthread_once_t first_use_once = PTHREAD_ONCE_INIT;

/* Removes the folders under base left by compiles of processes that died
 * (kill -9 during a compile): named as above with this tag and a pid that
 * is not alive (kill(pid, 0): ESRCH; EPERM means alive), and a folder (not
 * a symlink: lstat) owned by the effective uid, never another user's. The
 * folder is opened with O_NOFOLLOW and checked again through its fd (same
 * inode, same owner) before anything in it is removed. */
static void sweep_stale(const char *base) {
    DIR *d = opendir(base);
    if (!d) return;
    static const char head[] = "lazyfuse-cc-";
    uid_t me = geteuid();
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        pid_t pid;
        if (strncmp(name, head, sizeof head - 1) || !procs_parse_owner(name + sizeof head - 1, &pid) ||
            !procs_dead_here(pid))
            continue;
        struct stat st, st2;
        if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != me)
            continue;
        int fd = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        if (fstat(fd, &st2) != 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino || st2.st_uid != me) {
            close(fd);
            continue;
        }
        remove_tree(fd, 1);
        unlinkat(dirfd(d), name, AT_REMOVEDIR);
    }
    closedir(d);
}

static void first_use(void) {
    sweep_stale(tmp_base());
}

/* ---- the log, for a message ------------------------------------------------ */

enum {
    SHOW_LINES = 20,   /* first lines shown */
    SHOW_BYTES = 960,  /* ... in at most this many bytes */
    ERR_BYTES = 256,   /* the first "error" line, when not among them */
    LINE_KEEP = 512    /* bytes of a line looked at */
};
/* head (< 240) + ": " + shown + "\n[...]\n" + error line + the count
 * line (< 70) + NUL */
_Static_assert(240 + 2 + SHOW_BYTES + 7 + ERR_BYTES + 70 + 1 <= CC_MSG_MAX, "CC_MSG_MAX too small");

typedef struct logsum {
    const char *dir;                /* removed with its '/' from every line */
    size_t dirlen;
    char line[LINE_KEEP];           /* the current line's first bytes */
    size_t ll;
    bool cut;                       /* the line was longer */
    char shown[SHOW_BYTES + 1];     /* the first lines, made printable */
    size_t sl;
    uint64_t nshown;                /* lines in shown (a cut one included) */
    bool full;                      /* shown ran out of room */
    char err[ERR_BYTES + 1];        /* the first "error" line after them */
    size_t el;
    uint64_t err_at;                /* its line number (1-based), 0 if none */
    bool err_seen;                  /* an "error" line is shown or kept */
    uint64_t lines;                 /* lines so far */
} logsum;

/* Length of the UTF-8 sequence at s (n bytes left) when it is well formed
 * and encodes a printable code point (U+00A0 and up: no C1 controls), else
 * 0. */
static size_t utf8_printable(const unsigned char *s, size_t n) {
    size_t len = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (len == 2) return s[0] == 0xC2 && s[1] < 0xA0 ? 0 : 2;
    if (len == 3) return (s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0) ? 0 : 3;
    return (s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90) ? 0 : 4;
}

/* Appends sep, then src[0..n) made printable, to dst (*dl bytes used, cap
 * the array's size): printable ASCII, tab and printable UTF-8 as they are,
 * every other byte as \xNN. When src does not fit, or cut, it ends with
 * "[...]", for which room is always kept; when not even sep fits, nothing
 * is added. Returns false when it did not fit. */
static bool put_printable(char *dst, size_t *dl, size_t cap, const char *sep, const char *src, size_t n,
                          bool cut) {
    const unsigned char *s = (const unsigned char *)src;
    size_t k = *dl, room = cap - 1 - 5, sl = strlen(sep);
    if (k + sl > room) return false; /* full: the count line tells the rest */
    memcpy(dst + k, sep, sl);
    k += sl;
    bool fit = true;
    for (size_t i = 0; i < n;) {
        size_t u = s[i] == '\t' || (s[i] >= 0x20 && s[i] < 0x7f) ? 1 : utf8_printable(s + i, n - i);
        size_t w = u ? u : 4;
        if (k + w > room) {
            fit = false;
            break;
        }
        if (u) memcpy(dst + k, s + i, u);
        else snprintf(dst + k, 5, "\\x%02x", s[i]);
        k += w;
        i += u ? u : 1;
    }
    if (!fit || cut) {
        memcpy(dst + k, "[...]", 5);
        k += 5;
    }
    dst[k] = '\0';
    *dl = k;
    return fit;
}

static bool has_error(const char *s, size_t n) {
    for (size_t i = 0; i + 5 <= n; i++)
        if (!strncasecmp(s + i, "error", 5)) return true;
    return false;
}

static void end_line(logsum *L) {
    L->lines++;
    size_t n = L->ll;
    if (n && L->line[n - 1] == '\r' && !L->cut) n--;
    size_t w = 0; /* drop "<dir>/" */
    for (size_t r = 0; r < n;) {
        if (n - r > L->dirlen && !memcmp(L->line + r, L->dir, L->dirlen) && L->line[r + L->dirlen] == '/') r += L->dirlen + 1;
        else L->line[w++] = L->line[r++];
    }
    n = w;
    bool err = has_error(L->line, n);
    if (L->nshown < SHOW_LINES && !L->full) {
        L->full = !put_printable(L->shown, &L->sl, sizeof L->shown, L->nshown ? "\n" : "", L->line, n, L->cut);
        L->nshown++;
        L->err_seen |= err;
    } else if (err && !L->err_seen) {
        put_printable(L->err, &L->el, sizeof L->err, "", L->line, n, L->cut);
        L->err_at = L->lines;
        L->err_seen = true;
    }
    L->ll = 0;
    L->cut = false;
}

/* Summarizes the log in logfd (read from offset 0 to its end) for a
 * message: "<head>: <summary>" (see cc.h), "<head>: (no output)" for an
 * empty log when say_empty, else "<head>". NULL when out of memory. */
static char *fail_msg(const char *head, int logfd, const char *dir, bool say_empty) {
    logsum *L = graph_malloc(sizeof *L);
    if (!L) return NULL;
    memset(L, 0, sizeof *L);
    L->dir = dir;
    L->dirlen = strlen(dir);
    char buf[8192];
    off_t off = 0;
    int read_err = 0;
    for (;;) {
        ssize_t k = pread(logfd, buf, sizeof buf, off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) read_err = errno;
        if (k <= 0) break;
        off += k;
        for (ssize_t i = 0; i < k; i++) {
            if (buf[i] == '\n') end_line(L);
            else if (L->ll < LINE_KEEP) L->line[L->ll++] = buf[i];
            else L->cut = true;
        }
    }
    if (L->ll || L->cut) end_line(L);
    while (L->sl && strchr(" \t\n", L->shown[L->sl - 1])) L->shown[--L->sl] = '\0';
    uint64_t more = L->lines - L->nshown - (L->err_at ? 1 : 0);
    char count[96] = "";
    if (more)
        snprintf(count, sizeof count, "\n(%llu more line%s; set LF_DEBUG=cc for the full log)",
                 (unsigned long long)more, more == 1 ? "" : "s");
    char *m;
    if (read_err) m = graph_strdupf("%s (cannot read its log: %s)", head, strerror(read_err));
    else if (!L->sl && !L->err_at) m = say_empty ? graph_strdupf("%s: (no output)%s", head, count) : graph_strdupf("%s%s", head, count);
    else
        m = graph_strdupf("%s: %s%s%s%s", head, L->shown, !L->err_at ? "" : L->err_at == L->nshown + 1 ? "\n" : "\n[...]\n",
                          L->err, count);
    graph_free(L);
    return m;
}

/* Copies the whole log to stderr (LF_DEBUG=cc). */
static void dump_log(const char *head, int logfd) {
    fprintf(stderr, "lazyfuse: C compiler log (%s):\n", head);
    char buf[8192];
    off_t off = 0;
    for (;;) {
        ssize_t k = pread(logfd, buf, sizeof buf, off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        fwrite(buf, 1, (size_t)k, stderr);
        off += k;
    }
    fprintf(stderr, "lazyfuse: end of C compiler log\n");
}

/* ---- compile -------------------------------------------------------------- */

/* Reads a whole file of at most max bytes into graph_malloc'd memory; -1
 * with errno on failure: EFBIG (*size = its size, nothing read) when it is
 * larger. */
static int slurp(const char *path, size_t max, void **data, size_t *len, uint64_t *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno ? errno : EINVAL;
        close(fd);
        errno = e;
        return -1;
    }
    if ((uint64_t)st.st_size > max) {
        *size = (uint64_t)st.st_size;
        close(fd);
        errno = EFBIG;
        return -1;
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *buf = graph_malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO; /* shrank under us */
            graph_free(buf);
            close(fd);
            errno = e;
            return -1;
        }
        got += (size_t)k;
    }
    close(fd);
    *data = buf;
    *len = n;
    return 0;
}

/* environ with TMPDIR=dir (one allocation: pointers, then the string). */
static char **env_with_tmpdir(const char *dir) {
    size_t n = 0, dl = strlen(dir);
    while (environ[n]) n++;
    char **envp = graph_malloc((n + 2) * sizeof *envp + 7 + dl + 1);
    if (!envp) return NULL;
    char *kv = (char *)(envp + n + 2);
    memcpy(kv, "TMPDIR=", 7);
    memcpy(kv + 7, dir, dl + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "TMPDIR=", 7)) envp[k++] = environ[i];
    envp[k++] = kv;
    envp[k] = NULL;
    return envp;
}

int cc_compile(const char *source, const char *const *flags, const char *const *libs, double timeout_s,
               void **so, size_t *len, char **log) {
    return cc_compile_with(source, NULL, 0, flags, libs, timeout_s, so, len, log);
}

int cc_compile_with(const char *source, const void *obj, size_t obj_len, const char *const *flags,
                    const char *const *libs, double timeout_s, void **so, size_t *len, char **log) {
    const char *cmd = cc_command();
    double limit = limit_of(timeout_s);
    *so = NULL;
    *len = 0;
    if (log) *log = NULL;
    pthread_once(&first_use_once, first_use);
    char *msg = NULL, *dir = NULL, *cpath = NULL, *sopath = NULL, *logpath = NULL, *opath = NULL;
    char **argv = NULL, **envp = NULL;
    int logfd = -1, rc = -1;
    bool made_dir = false;
    if (!(dir = graph_strdupf("%s/lazyfuse-cc-%d-%s-XXXXXX", tmp_base(), (int)getpid(), procs_host_tag()))) goto done;
    if (!mkdtemp(dir)) {
        int e = errno;
        msg = no_room(e) ? graph_strdupf("%s '%s': cannot create a temp folder: %s", room_words(e), tmp_base(), strerror(e))
                         : graph_strdupf("cannot create a temp folder in '%s': %s", tmp_base(), strerror(e));
        rc = CC_NO_TMP;
        goto done;
    }
    made_dir = true;
    if (!(cpath = graph_strdupf("%s/k.c", dir)) || !(sopath = graph_strdupf("%s/k.so", dir)) ||
        !(logpath = graph_strdupf("%s/log", dir)))
        goto done;
    int cfd = open(cpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (cfd < 0 || fileio_write_all(cfd, source, strlen(source)) != 0) {
        msg = tmp_fail(errno, "write", cpath);
        rc = CC_NO_TMP;
        if (cfd >= 0) close(cfd);
        goto done;
    }
    if (close(cfd) != 0) {
        msg = tmp_fail(errno, "write", cpath);
        rc = CC_NO_TMP;
        goto done;
    }
    if (obj) { /* the extra object, linked after k.c */
        if (!(opath = graph_strdupf("%s/p.o", dir))) goto done;
        int ofd = open(opath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (ofd < 0 || fileio_write_all(ofd, obj, obj_len) != 0) {
            msg = tmp_fail(errno, "write", opath);
            rc = CC_NO_TMP;
            if (ofd >= 0) close(ofd);
            goto done;
        }
        if (close(ofd) != 0) {
            msg = tmp_fail(errno, "write", opath);
            rc = CC_NO_TMP;
            goto done;
        }
    }
    if ((logfd = open(logpath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
        msg = tmp_fail(errno, "create", logpath);
        rc = CC_NO_TMP;
        goto done;
    }
    argv = build_argv(cmd, flags, (const char *const[]){"-o", sopath, cpath, opath}, opath ? 4 : 3, libs);
    if (!argv || !(envp = env_with_tmpdir(dir))) goto done;
    int status;
    bool late;
    int err = spawn_wait(argv, envp, logfd, limit, &status, &late);
    char head[240];
    if (err) {
        msg = spawn_error(cmd, err);
        goto done;
    }
    if (late) {
        snprintf(head, sizeof head,
                 "the C compiler did not finish within %g s (killed; lf_ctx_options.compile_timeout or "
                 "LF_COMPILE_TIMEOUT set the limit)", limit);
        if (graph_debug_on("cc")) dump_log(head, logfd);
        msg = fail_msg(head, logfd, dir, false);
        goto done;
    }
    char what[160];
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        /* for lack of room? (checked while what it left is still there) */
        int e = WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ ? EFBIG : room_check(dir);
        bool full = no_room(e);
        snprintf(head, sizeof head, "%s%s%s%sC compiler failed (%s)", full ? room_words(e) : "", full ? " '" : "",
                 full ? tmp_base() : "", full ? "': " : "", status_str(what, sizeof what, status));
        if (graph_debug_on("cc")) dump_log(head, logfd);
        msg = fail_msg(head, logfd, dir, true);
        if (full) rc = CC_NO_TMP;
        goto done;
    }
    uint64_t size = 0;
    if (slurp(sopath, CC_MAX_OBJECT, so, len, &size) != 0) {
        if (errno == ENOMEM) goto done;
        if (errno == EFBIG)
            snprintf(what, sizeof what, "exit status 0, but k.so has %llu bytes, more than the %zu a kernel object may have",
                     (unsigned long long)size, (size_t)CC_MAX_OBJECT);
        else snprintf(what, sizeof what, "exit status 0, but no readable k.so: %s", strerror(errno));
        snprintf(head, sizeof head, "C compiler failed (%s)", what);
        if (graph_debug_on("cc")) dump_log(head, logfd);
        msg = fail_msg(head, logfd, dir, true);
        goto done;
    }
    rc = 0;
done:
    if (logfd >= 0) close(logfd);
    if (made_dir) remove_at(AT_FDCWD, dir);
    graph_free(envp);
    graph_free(argv);
    graph_free(logpath);
    graph_free(opath);
    graph_free(sopath);
    graph_free(cpath);
    graph_free(dir);
    give(log, msg);
    return rc;
}

/* ---- loading -------------------------------------------------------------- */

static atomic_uint_fast64_t load_counter;

/* Via a temp file, unlinked once loaded: for when memfd or /proc is missing. */
static void *dlopen_tmpfile(const void *so, size_t len, char **why) {
    char *path = graph_strdupf("%s/lazyfuse-kernel-XXXXXX.so", tmp_base());
    if (!path) return NULL;
    void *h = NULL;
    int fd = mkostemps(path, 3, O_CLOEXEC);
    if (fd < 0 || fileio_write_all(fd, so, len) != 0) {
        give(why, graph_strdupf("cannot write kernel file '%s': %s", path, strerror(errno)));
    } else {
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) give(why, graph_strdupf("cannot load kernel: %s", dlerror()));
    }
    if (fd >= 0) {
        unlink(path);
        close(fd);
    }
    graph_free(path);
    return h;
}

void *cc_dlopen_bytes(const void *so, size_t len, char **why) {
    if (why) *why = NULL;
    if (len > CC_MAX_OBJECT) {
        give(why, graph_strdupf("cannot load kernel: an object of %zu bytes, more than the %zu a kernel object may have",
                                len, (size_t)CC_MAX_OBJECT));
        return NULL;
    }
    int fd = memfd_create("lazyfuse-kernel", MFD_CLOEXEC | MFD_EXEC);
    if (fd < 0 && errno == EINVAL) fd = memfd_create("lazyfuse-kernel", MFD_CLOEXEC);
    if (fd < 0 || access("/proc/self/fd", X_OK) != 0) {
        if (fd >= 0) close(fd);
        return dlopen_tmpfile(so, len, why);
    }
    if (fileio_write_all(fd, so, len) != 0) {
        give(why, graph_strdupf("cannot write kernel to memory: %s", strerror(errno)));
        close(fd);
        return NULL;
    }
    /* "/proc/self/fd/" + one "./" (bit 1) or "//" (bit 0) per bit of a fresh
     * counter, high bit first, + N: distinct strings, one file. */
    uint_fast64_t c = atomic_fetch_add(&load_counter, 1);
    char name[32 + 2 * 64];
    size_t k = (size_t)snprintf(name, sizeof name, "/proc/self/fd/");
    int top = 63;
    while (top >= 0 && !((c >> top) & 1u)) top--;
    for (int b = top; b >= 0; b--, k += 2) memcpy(name + k, (c >> b) & 1u ? "./" : "//", 2);
    snprintf(name + k, sizeof name - k, "%d", fd);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) give(why, graph_strdupf("cannot load kernel: %s", dlerror()));
    close(fd);
    return h;
}
