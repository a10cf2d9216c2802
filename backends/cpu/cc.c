/* backends/cpu/cc.c: the system C compiler as a subprocess, and loading the
 * shared objects it makes straight from memory.
 *
 * What must stay true:
 * - No shell: the compiler runs through posix_spawnp with an argv built from
 *   $CC (split on blanks) plus our arguments; stdin is /dev/null, stdout and
 *   stderr go to a file (not a pipe, so a compiler wrapper that leaves a
 *   daemon holding its output cannot hang us); signals are reset to default
 *   and unblocked in the child; waits survive EINTR.
 * - cc_compile owns a private mkdtemp folder and removes it, and everything
 *   the compiler left in it, on every path.
 * - cc_dlopen_bytes gives every call a dlopen name never used before in this
 *   process. glibc returns an already loaded object when the name matches, so
 *   reusing "/proc/self/fd/N" after fd N was recycled would hand back the
 *   previous kernel; the name is made unique by a counter spelled as "./" and
 *   "//" path segments, which the kernel resolves to the same file.
 * - Every allocation goes through graph_malloc and is freed on every path.
 */
#include "backends/cpu/cc.h"
#include "backends/fileio.h"
#include "graph/graph.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3: ask for an executable memfd explicitly */
#endif

enum { LOG_CAP = 8192, PROBE_CAP = 4096 };

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

/* False when argv0 names no executable file: itself when it holds a '/', else
 * in no folder of $PATH (empty entries mean "."). posix_spawnp reports a
 * missing program as ENOENT on current glibc, but as a child exit status
 * under valgrind and old libcs; this check makes "not found" the same
 * everywhere. Allocates nothing. */
static bool program_exists(const char *argv0) {
    if (strchr(argv0, '/')) return access(argv0, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) path = "/bin:/usr/bin";
    size_t nl = strlen(argv0);
    for (const char *p = path;; p++) {
        size_t dl = strcspn(p, ":");
        char full[4096];
        if (dl + 1 + nl < sizeof full) {
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

/* Runs argv with stdin from /dev/null and stdout + stderr into outfd, and
 * waits. 0 with *status (as from waitpid), or an errno value: from the spawn
 * (ENOENT: no such program) or from waiting. */
static int spawn_wait(char **argv, int outfd, int *status) {
    if (!program_exists(argv[0])) return ENOENT;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc) return rc;
    rc = posix_spawnattr_init(&at);
    if (rc) {
        posix_spawn_file_actions_destroy(&fa);
        return rc;
    }
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    pid_t pid = -1;
    if (!(rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) &&
        !(rc = posix_spawn_file_actions_adddup2(&fa, outfd, 1)) &&
        !(rc = posix_spawn_file_actions_adddup2(&fa, outfd, 2)) &&
        !(rc = posix_spawnattr_setsigmask(&at, &none)) &&
        !(rc = posix_spawnattr_setsigdefault(&at, &all)) &&
        !(rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)))
        rc = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) return rc;
    while (waitpid(pid, status, 0) < 0) {
        if (errno != EINTR) return errno;
    }
    return 0;
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

int cc_probe(char **version, char **why) {
    const char *cmd = cc_command();
    if (version) *version = NULL;
    if (why) *why = NULL;
    char *msg = NULL, *out = NULL, *tmpl = NULL;
    int fd = -1, rc = -1;
    char **argv = build_argv(cmd, NULL, (const char *const[]){"--version"}, 1, NULL);
    if (!argv || !(tmpl = graph_strdupf("%s/lazyfuse-probe-XXXXXX", tmp_base()))) goto done;
    if ((fd = mkostemp(tmpl, O_CLOEXEC)) < 0) {
        msg = graph_strdupf("cannot create a temp file in '%s': %s", tmp_base(), strerror(errno));
        goto done;
    }
    unlink(tmpl); /* the fd is all we need */
    int status, err = spawn_wait(argv, fd, &status);
    if (err) {
        msg = spawn_error(cmd, err);
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

/* ---- compile -------------------------------------------------------------- */

/* Removes name (relative to folder fd parent) and, when it is a folder,
 * everything under it (depth-bounded). Allocates nothing from graph_malloc, so
 * cleanup works when memory has run out. */
static void remove_at(int parent, const char *name, int depth) {
    if (unlinkat(parent, name, 0) == 0 || (errno != EISDIR && errno != EPERM)) return;
    int fd = depth < 16 ? openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) remove_at(dirfd(d), e->d_name, depth + 1);
        closedir(d);
    } else if (fd >= 0) {
        close(fd);
    }
    unlinkat(parent, name, AT_REMOVEDIR);
}

/* Deletes every "<prefix>" occurrence from s (NUL-terminated) in place. */
static void strip_all(char *s, const char *prefix) {
    size_t pl = strlen(prefix);
    if (!pl) return;
    char *w = s;
    for (const char *r = s; *r;) {
        if (!strncmp(r, prefix, pl)) r += pl;
        else *w++ = *r++;
    }
    *w = '\0';
}

/* The failure message: "C compiler failed (<what>): <log text>". */
static char *fail_msg(const char *what, int logfd, const char *dir) {
    size_t n = 0;
    bool more = false;
    char *text = read_from_start(logfd, LOG_CAP - 32, &n, &more);
    if (!text) return errno == ENOMEM ? NULL : graph_strdupf("C compiler failed (%s)", what);
    char *prefix = graph_strdupf("%s/", dir);
    if (!prefix) {
        graph_free(text);
        return NULL;
    }
    strip_all(text, prefix);
    graph_free(prefix);
    n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '\r' ||
                 text[n - 1] == '\t'))
        text[--n] = '\0';
    char *m = graph_strdupf("C compiler failed (%s): %s%s", what, n ? text : "(no output)",
                   more ? "\n[log truncated]" : "");
    graph_free(text);
    return m;
}

/* Reads a whole file into graph_malloc'd memory; -1 with errno on failure. */
static int slurp(const char *path, void **data, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > SIZE_MAX / 2) {
        int e = errno ? errno : EINVAL;
        close(fd);
        errno = e;
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

int cc_compile(const char *source, const char *const *flags, const char *const *libs, void **so,
               size_t *len, char **log) {
    const char *cmd = cc_command();
    *so = NULL;
    *len = 0;
    if (log) *log = NULL;
    char *msg = NULL, *dir = NULL, *cpath = NULL, *sopath = NULL, *logpath = NULL;
    char **argv = NULL;
    int logfd = -1, rc = -1;
    bool made_dir = false;
    if (!(dir = graph_strdupf("%s/lazyfuse-cc-XXXXXX", tmp_base()))) goto done;
    if (!mkdtemp(dir)) {
        msg = graph_strdupf("cannot create a temp folder in '%s': %s", tmp_base(), strerror(errno));
        goto done;
    }
    made_dir = true;
    if (!(cpath = graph_strdupf("%s/k.c", dir)) || !(sopath = graph_strdupf("%s/k.so", dir)) ||
        !(logpath = graph_strdupf("%s/log", dir)))
        goto done;
    int cfd = open(cpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (cfd < 0 || fileio_write_all(cfd, source, strlen(source)) != 0) {
        msg = graph_strdupf("cannot write '%s': %s", cpath, strerror(errno));
        if (cfd >= 0) close(cfd);
        goto done;
    }
    if (close(cfd) != 0) {
        msg = graph_strdupf("cannot write '%s': %s", cpath, strerror(errno));
        goto done;
    }
    if ((logfd = open(logpath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
        msg = graph_strdupf("cannot create '%s': %s", logpath, strerror(errno));
        goto done;
    }
    argv = build_argv(cmd, flags, (const char *const[]){"-o", sopath, cpath}, 3, libs);
    if (!argv) goto done;
    int status, err = spawn_wait(argv, logfd, &status);
    char what[160];
    if (err) {
        msg = spawn_error(cmd, err);
        goto done;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        msg = fail_msg(status_str(what, sizeof what, status), logfd, dir);
        goto done;
    }
    if (slurp(sopath, so, len) != 0) {
        if (errno == ENOMEM) goto done;
        snprintf(what, sizeof what, "exit status 0, but no readable k.so: %s", strerror(errno));
        msg = fail_msg(what, logfd, dir);
        goto done;
    }
    rc = 0;
done:
    if (logfd >= 0) close(logfd);
    if (made_dir) remove_at(AT_FDCWD, dir, 0);
    graph_free(argv);
    graph_free(logpath);
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
