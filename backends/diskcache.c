/* backends/diskcache.c: kernel cache entries on disk (see diskcache.h).
 *
 * What must stay true:
 * - Nothing is read from or written to a folder that is not private to us
 *   (owned by the effective uid, not writable by group or others), checked
 *   through the folder's fd on every operation, which then works relative
 *   to that fd; no entry is read unless it is private too.
 * - diskcache_get hands out only bytes whose size is within the bound and
 *   whose stored key, lengths and SHA-256 match; it reads the payload only
 *   after the size and the key checked. A file failing a check is unlinked
 *   (only if the name still names the file that was read) so the caller
 *   rebuilds it.
 * - diskcache_put never writes <dir>/<key> in place: it fills a temp file of
 *   its own (O_EXCL, a name unique per process and call, carrying the pid
 *   and host tag so that diskcache_open can tell a dead writer's leftover)
 *   and renames it over the entry, so concurrent writers and readers never
 *   see a torn entry, and the temp file is gone on every failure path.
 * - Every allocation goes through graph_malloc and is freed on every path;
 *   reads and writes survive EINTR and short transfers.
 */
#include "backends/diskcache.h"
#include "backends/fileio.h"
#include "backends/procs.h"
#include "backends/sha256.h"
#include "graph/graph.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A key is a file name of the folder: not empty, no '/', not hidden (the
 * temp and lock files are), at most 255 bytes (NAME_MAX). */
static bool key_ok(const char *key) {
    return key && key[0] && key[0] != '.' && !strchr(key, '/') && strlen(key) <= 255;
}

/* ---- the folder ---------------------------------------------------------- */

static const char *env_nonempty(const char *name) {
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

char *diskcache_dir(const char *opt_dir) {
    if (opt_dir && opt_dir[0]) return graph_strdup(opt_dir);
    const char *v = env_nonempty("LF_CACHE_DIR");
    if (v) return graph_strdup(v);
    v = env_nonempty("XDG_CACHE_HOME");
    if (v && v[0] == '/') return graph_strdupf("%s/lazyfuse", v);
    v = env_nonempty("HOME");
    if (v) return graph_strdupf("%s/.cache/lazyfuse", v);
    return NULL;
}

bool diskcache_dir_expected(const char *opt_dir) {
    const char *xdg = env_nonempty("XDG_CACHE_HOME");
    return (opt_dir && opt_dir[0]) || env_nonempty("LF_CACHE_DIR") || (xdg && xdg[0] == '/') || env_nonempty("HOME");
}

/* Creates dir and its missing parents with mode 0700. 0, or -1 with errno. */
static int mkdirs(const char *dir) {
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return 0;
        errno = ENOTDIR;
        return -1;
    }
    if (errno != ENOENT) return -1;
    size_t n = strlen(dir);
    char *p = graph_malloc(n + 1);
    if (!p) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(p, dir, n + 1);
    int rc = 0;
    for (size_t i = 1; i <= n && rc == 0; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        if (p[i - 1] == '/') continue; /* "a//b" */
        char c = p[i];
        p[i] = '\0';
        if (stat(p, &st) == 0) {
            if (!S_ISDIR(st.st_mode)) errno = ENOTDIR, rc = -1;
        } else if (errno != ENOENT) {
            rc = -1;
        } else if (mkdir(p, 0700) != 0 && errno != EEXIST) { /* EEXIST: a racing creator */
            rc = -1;
        }
        p[i] = c;
    }
    int e = errno;
    graph_free(p);
    errno = e;
    return rc;
}

/* ---- the folder's trust ---------------------------------------------------- */

typedef enum { DIR_OPEN, DIR_MISSING, DIR_ERROR, DIR_UNSAFE, DIR_NOMEM } dir_state;

/* Why st (of dir, or of entry key in dir when key is set) is not private to
 * us, graph_malloc'd; NULL when it is (or out of memory: *nomem). */
static char *not_private(const struct stat *st, const char *dir, const char *key, bool *nomem) {
    *nomem = false;
    uid_t me = geteuid();
    char *why = NULL;
    const char *what = key ? "kernel cache entry" : "kernel cache folder";
    if (st->st_uid != me)
        why = graph_strdupf("%s '%s%s%s' is owned by uid %ld, not by this process's user (uid %ld)", what, dir,
                            key ? "/" : "", key ? key : "", (long)st->st_uid, (long)me);
    else if (st->st_mode & (S_IWGRP | S_IWOTH))
        why = graph_strdupf("%s '%s%s%s' is writable by %s (mode %04o)", what, dir, key ? "/" : "",
                            key ? key : "",
                            (st->st_mode & S_IWGRP) && (st->st_mode & S_IWOTH) ? "group and others"
                            : (st->st_mode & S_IWGRP)                          ? "its group"
                                                                               : "others",
                            (unsigned)(st->st_mode & 07777));
    else
        return NULL;
    if (!why) *nomem = true;
    return why;
}

/* Opens dir (following symlinks in its path) as a directory fd and checks
 * that it is private. The fd, or -1 with *state (and *why for DIR_UNSAFE
 * when why is not NULL; errno kept for DIR_ERROR / DIR_MISSING). */
static int dir_open(const char *dir, dir_state *state, char **why) {
    if (why) *why = NULL;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        *state = errno == ENOENT ? DIR_MISSING : DIR_ERROR;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        *state = DIR_ERROR;
        return -1;
    }
    bool nomem;
    char *bad = not_private(&st, dir, NULL, &nomem);
    if (bad || nomem) {
        close(fd);
        *state = nomem ? DIR_NOMEM : DIR_UNSAFE;
        if (why) *why = bad;
        else graph_free(bad);
        return -1;
    }
    *state = DIR_OPEN;
    return fd;
}

/* Unlinks name in dfd if it still names the file open as fd (a writer may
 * have renamed a good entry over it meanwhile). Best effort. */
static void drop_if_same(int dfd, const char *name, int fd) {
    struct stat a, b;
    if (fstat(fd, &a) == 0 && fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        unlinkat(dfd, name, 0);
}

/* Takes flock(LOCK_EX | LOCK_NB) on the lock file name of dfd and checks
 * that name still names it (a holder unlinks its lock file before it
 * unlocks). 1: fd holds the lock; 0: busy or unlinked meanwhile (*busy says
 * which); -1: error. */
static int try_lock(int dfd, const char *name, int fd, bool *busy) {
    *busy = false;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) return -1;
        *busy = true;
        return 0;
    }
    struct stat a, b;
    return fstat(fd, &a) == 0 && fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

static const char TMP_HEAD[] = ".tmp-", LOCK_HEAD[] = ".lock-";

/* Removes what killed processes left in the folder dfd: temp files
 * ".tmp-<pid>-<tag>-..." whose writer is dead on this host, and lock files
 * nobody holds (taking the lock and unlinking, as a holder does, so a
 * process about to lock it starts over with a new file). Best effort. */
static void sweep_leftovers(int dfd) {
    int dup_fd = dup(dfd);
    if (dup_fd < 0) return;
    DIR *d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        pid_t pid;
        if (!strncmp(name, TMP_HEAD, sizeof TMP_HEAD - 1)) {
            if (procs_parse_owner(name + sizeof TMP_HEAD - 1, &pid) && procs_dead_here(pid)) unlinkat(dfd, name, 0);
        } else if (!strncmp(name, LOCK_HEAD, sizeof LOCK_HEAD - 1)) {
            int fd = openat(dfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
            if (fd < 0) continue;
            bool busy;
            if (try_lock(dfd, name, fd, &busy) == 1) unlinkat(dfd, name, 0);
            close(fd);
        }
    }
    closedir(d);
}

diskcache_dir_status diskcache_open(const char *dir, char **why) {
    if (why) *why = NULL;
    char *msg = NULL;
    diskcache_dir_status r = DISKCACHE_DIR_UNUSABLE;
    if (!dir || !dir[0]) {
        msg = graph_strdupf("no kernel cache folder");
        goto done;
    }
    if (mkdirs(dir) != 0) {
        if (errno == ENOMEM) return DISKCACHE_DIR_NOMEM;
        msg = graph_strdupf("cannot create the kernel cache folder '%s': %s", dir, strerror(errno));
        goto done;
    }
    dir_state state;
    int dfd = dir_open(dir, &state, &msg);
    if (dfd < 0) {
        if (state == DIR_NOMEM) return DISKCACHE_DIR_NOMEM;
        if (state == DIR_UNSAFE) r = DISKCACHE_DIR_UNSAFE;
        else msg = graph_strdupf("cannot open the kernel cache folder '%s': %s", dir, strerror(errno));
        goto done;
    }
    sweep_leftovers(dfd);
    close(dfd);
    return DISKCACHE_DIR_OK;
done:
    if (why) *why = msg;
    else graph_free(msg);
    return r;
}

/* ---- transfers ----------------------------------------------------------- */

/* Reads exactly n bytes at offset off: 0, or -1 (errno set; 0 for an early
 * EOF). */
static int pread_all(int fd, void *buf, size_t n, off_t off) {
    char *p = buf;
    while (n) {
        ssize_t k = pread(fd, p, n, off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) {
            errno = 0;
            return -1;
        }
        p += k, n -= (size_t)k, off += k;
    }
    return 0;
}

static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The trailer of an entry: magic, lengths, SHA-256 of (key length, key,
 * payload). */
static void make_trailer(uint8_t t[DISKCACHE_TRAILER], const char *key, const void *data, size_t len) {
    size_t klen = strlen(key);
    uint8_t kl[8];
    put_le64(kl, (uint64_t)klen);
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, kl, 8);
    sha256_update(&c, key, klen);
    sha256_update(&c, data, len);
    memcpy(t, DISKCACHE_MAGIC, 8);
    put_le64(t + 8, (uint64_t)len);
    memcpy(t + 16, kl, 8);
    sha256_final(&c, t + 24);
}

/* ---- get ----------------------------------------------------------------- */

diskcache_result diskcache_get(const char *dir, const char *key, void **data, size_t *len, char **why) {
    *data = NULL;
    *len = 0;
    if (why) *why = NULL;
    if (!dir || !key_ok(key)) return DISKCACHE_MISS;
    dir_state state;
    int dfd = dir_open(dir, &state, why);
    if (dfd < 0) return state == DIR_UNSAFE ? DISKCACHE_UNSAFE_DIR : state == DIR_NOMEM ? DISKCACHE_NOMEM : DISKCACHE_MISS;
    diskcache_result r = DISKCACHE_MISS;
    void *buf = NULL;
    /* O_NONBLOCK: a FIFO planted under the key must not hang us;
       O_NOFOLLOW: an entry is a file of the folder, never a link */
    int fd = openat(dfd, key, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ELOOP && unlinkat(dfd, key, 0) == 0) r = DISKCACHE_CORRUPT;
        close(dfd);
        return r;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) goto done;
    bool nomem;
    char *bad = not_private(&st, dir, key, &nomem);
    if (bad || nomem) {
        r = nomem ? DISKCACHE_NOMEM : DISKCACHE_UNSAFE_ENTRY;
        if (bad) drop_if_same(dfd, key, fd);
        if (why) *why = bad;
        else graph_free(bad);
        goto done;
    }
    r = DISKCACHE_CORRUPT;
    size_t klen = strlen(key);
    if (st.st_size < (off_t)(DISKCACHE_TRAILER + klen) || (uint64_t)st.st_size > DISKCACHE_MAX_ENTRY) goto done;
    size_t n = (size_t)st.st_size - DISKCACHE_TRAILER - klen;
    uint8_t t[DISKCACHE_TRAILER], want[DISKCACHE_TRAILER];
    char stored_key[256];
    if (klen > sizeof stored_key) goto done;
    if (pread_all(fd, t, sizeof t, st.st_size - DISKCACHE_TRAILER) != 0 ||
        (memcmp(t, DISKCACHE_MAGIC, 8) == 0 && pread_all(fd, stored_key, klen, (off_t)n) != 0)) {
        r = errno ? DISKCACHE_MISS : DISKCACHE_CORRUPT; /* I/O error vs. short file */
        goto done;
    }
    if (memcmp(t, DISKCACHE_MAGIC, 8) != 0 || get_le64(t + 8) != (uint64_t)n || get_le64(t + 16) != (uint64_t)klen ||
        memcmp(stored_key, key, klen) != 0)
        goto done;
    if (n > 0 && !(buf = graph_malloc(n))) {
        r = DISKCACHE_NOMEM;
        goto done;
    }
    if (pread_all(fd, buf, n, 0) != 0) {
        r = errno ? DISKCACHE_MISS : DISKCACHE_CORRUPT;
        goto done;
    }
    make_trailer(want, key, buf, n);
    if (memcmp(t + 24, want + 24, 32) != 0) goto done;
    r = DISKCACHE_HIT;
    *data = buf, *len = n;
    buf = NULL;
done:
    if (r == DISKCACHE_CORRUPT) drop_if_same(dfd, key, fd);
    close(fd);
    close(dfd);
    graph_free(buf);
    return r;
}

/* ---- put ----------------------------------------------------------------- */

static atomic_ulong tmp_counter;

int diskcache_put(const char *dir, const char *key, const void *data, size_t len, char **why) {
    char *msg = NULL, *tmp = NULL;
    int fd = -1, dfd = -1, rc = -1;
    if (why) *why = NULL;
    if (!dir || !dir[0]) {
        msg = graph_strdupf("disk cache: no cache folder");
        goto done;
    }
    if (!key_ok(key)) {
        msg = graph_strdupf("disk cache: bad key '%s' in '%s' (empty, holds '/' or starts with '.')",
                   key ? key : "(null)", dir);
        goto done;
    }
    size_t klen = strlen(key);
    if (len > DISKCACHE_MAX_ENTRY - DISKCACHE_TRAILER - klen) {
        msg = graph_strdupf("disk cache: entry '%s/%s' of %zu bytes would pass the bound of %zu bytes", dir, key, len,
                   DISKCACHE_MAX_ENTRY);
        goto done;
    }
    if (mkdirs(dir) != 0) {
        msg = graph_strdupf("disk cache: cannot create folder '%s': %s", dir, strerror(errno));
        goto done;
    }
    dir_state state;
    char *unsafe = NULL;
    if ((dfd = dir_open(dir, &state, &unsafe)) < 0) {
        if (state == DIR_UNSAFE) msg = graph_strdupf("disk cache: %s", unsafe ? unsafe : "unsafe folder");
        else if (state != DIR_NOMEM) msg = graph_strdupf("disk cache: cannot open folder '%s': %s", dir, strerror(errno));
        graph_free(unsafe);
        goto done;
    }
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        graph_free(tmp);
        tmp = graph_strdupf("%s%ld-%s-%lu-%s", TMP_HEAD, (long)getpid(), procs_host_tag(),
                   atomic_fetch_add(&tmp_counter, 1), key);
        if (!tmp) goto done;
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 && errno != EEXIST && errno != EINTR) break;
    }
    if (fd < 0) {
        msg = graph_strdupf("disk cache: cannot create '%s/%s': %s", dir, tmp, strerror(errno));
        graph_free(tmp);
        tmp = NULL; /* not ours: nothing to remove */
        goto done;
    }
    uint8_t t[DISKCACHE_TRAILER];
    make_trailer(t, key, data, len);
    if (fileio_write_all(fd, data, len) != 0 || fileio_write_all(fd, key, klen) != 0 ||
        fileio_write_all(fd, t, sizeof t) != 0) {
        msg = graph_strdupf("disk cache: cannot write '%s/%s': %s", dir, tmp, strerror(errno));
        goto done;
    }
    int cfd = fd;
    fd = -1;
    if (close(cfd) != 0) { /* delayed write errors (NFS, quota) show up here */
        msg = graph_strdupf("disk cache: cannot write '%s/%s': %s", dir, tmp, strerror(errno));
        goto done;
    }
    if (renameat(dfd, tmp, dfd, key) != 0) {
        msg = graph_strdupf("disk cache: cannot rename '%s/%s' to '%s/%s': %s", dir, tmp, dir, key, strerror(errno));
        goto done;
    }
    graph_free(tmp);
    tmp = NULL;
    rc = 0;
done:
    if (fd >= 0) close(fd);
    if (tmp) {
        unlinkat(dfd, tmp, 0);
        graph_free(tmp);
    }
    if (dfd >= 0) close(dfd);
    if (why) *why = msg;
    else graph_free(msg);
    return rc;
}

/* ---- remove and lock ------------------------------------------------------ */

void diskcache_remove(const char *dir, const char *key) {
    if (!dir || !key_ok(key)) return;
    dir_state state;
    int dfd = dir_open(dir, &state, NULL);
    if (dfd < 0) return;
    unlinkat(dfd, key, 0);
    close(dfd);
}

/* Opens and locks <dir>/.lock-<key>. The holder unlinks the file before it
 * unlocks (diskcache_unlock), so a waiter that wakes holding the lock of an
 * unlinked file must start over: the lock counts only while fd's inode is
 * still the one the name names (try_lock). */
int diskcache_lock(const char *dir, const char *key, double timeout_s, char **path_out) {
    *path_out = NULL;
    if (!dir || !key_ok(key)) return -1;
    char *name = graph_strdupf("%s%s", LOCK_HEAD, key);
    char *path = graph_strdupf("%s/%s%s", dir, LOCK_HEAD, key);
    dir_state state;
    int dfd = -1;
    if (!name || !path || mkdirs(dir) != 0 || (dfd = dir_open(dir, &state, NULL)) < 0) goto fail;
    double deadline = graph_now_seconds() + (timeout_s > 0 ? timeout_s : 0);
    long wait_ns = 1000000; /* 1 ms, doubling to 50 ms */
    for (;;) {
        int fd = openat(dfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
        if (fd < 0) break;
        bool busy;
        int got = try_lock(dfd, name, fd, &busy);
        if (got == 1) {
            close(dfd);
            graph_free(name);
            *path_out = path;
            return fd;
        }
        close(fd);
        if (got < 0) break;
        if (!busy) continue; /* unlinked by the holder we waited for: take the new file */
        if (graph_now_seconds() >= deadline) break;
        struct timespec ts = {0, wait_ns};
        nanosleep(&ts, NULL);
        if (wait_ns < 50000000) wait_ns *= 2;
    }
fail:
    if (dfd >= 0) close(dfd);
    graph_free(name);
    graph_free(path);
    return -1;
}

void diskcache_unlock(int fd, char *path) {
    if (fd < 0) return;
    if (path) unlink(path);
    close(fd);
    graph_free(path);
}
