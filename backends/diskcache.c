/* backends/diskcache.c: kernel cache entries on disk (see diskcache.h).
 *
 * What must stay true:
 * - diskcache_get hands out only bytes whose length and SHA-256 match the
 *   trailer; a file failing a check is unlinked (only if the path still names
 *   the file that was read) so the caller rebuilds it.
 * - diskcache_put never writes <dir>/<key> in place: it fills a temp file of
 *   its own (O_EXCL, a name unique per process and call) and renames it over
 *   the entry, so concurrent writers and readers never see a torn entry, and
 *   the temp file is gone on every failure path.
 * - Every allocation goes through graph_malloc and is freed on every path;
 *   reads and writes survive EINTR and short transfers.
 */
#include "backends/diskcache.h"
#include "backends/fileio.h"
#include "backends/sha256.h"
#include "graph/graph.h"

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

static bool key_ok(const char *key) {
    return key && key[0] && key[0] != '.' && !strchr(key, '/');
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

/* ---- transfers ----------------------------------------------------------- */

/* Reads exactly n bytes: 0, or -1 (errno set; EIO-like 0 for an early EOF). */
static int read_all(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) {
            errno = 0;
            return -1;
        }
        p += k, n -= (size_t)k;
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

static void make_trailer(uint8_t t[DISKCACHE_TRAILER], const void *data, size_t len) {
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, data, len);
    memcpy(t, DISKCACHE_MAGIC, 8);
    put_le64(t + 8, (uint64_t)len);
    sha256_final(&c, t + 16);
}

/* ---- get ----------------------------------------------------------------- */

/* Unlinks path if it still names the file open as fd (a writer may have
 * renamed a good entry over it meanwhile). Best effort. */
static void drop_corrupt(const char *path, int fd) {
    struct stat a, b;
    if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        unlink(path);
}

diskcache_result diskcache_get(const char *dir, const char *key, void **data, size_t *len) {
    *data = NULL;
    *len = 0;
    if (!dir || !key_ok(key)) return DISKCACHE_MISS;
    char *path = graph_strdupf("%s/%s", dir, key);
    if (!path) return DISKCACHE_NOMEM;
    /* O_NONBLOCK: a FIFO planted under the key must not hang us. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        graph_free(path);
        return DISKCACHE_MISS;
    }
    diskcache_result r = DISKCACHE_CORRUPT;
    void *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        r = DISKCACHE_MISS;
        goto done;
    }
    if (st.st_size < DISKCACHE_TRAILER ||
        (uint64_t)(st.st_size - DISKCACHE_TRAILER) > (uint64_t)SIZE_MAX)
        goto done;
    size_t n = (size_t)(st.st_size - DISKCACHE_TRAILER);
    uint8_t t[DISKCACHE_TRAILER], want[DISKCACHE_TRAILER];
    if (n > 0 && !(buf = graph_malloc(n))) {
        r = DISKCACHE_NOMEM;
        goto done;
    }
    if (read_all(fd, buf, n) != 0 || read_all(fd, t, sizeof t) != 0) {
        r = errno ? DISKCACHE_MISS : DISKCACHE_CORRUPT; /* I/O error vs. short file */
        goto done;
    }
    make_trailer(want, buf, n);
    if (memcmp(t, DISKCACHE_MAGIC, 8) != 0 || get_le64(t + 8) != (uint64_t)n ||
        memcmp(t + 16, want + 16, 32) != 0)
        goto done;
    r = DISKCACHE_HIT;
    *data = buf, *len = n;
    buf = NULL;
done:
    if (r == DISKCACHE_CORRUPT) drop_corrupt(path, fd);
    close(fd);
    graph_free(buf);
    graph_free(path);
    return r;
}

/* ---- put ----------------------------------------------------------------- */

static atomic_ulong tmp_counter;

int diskcache_put(const char *dir, const char *key, const void *data, size_t len, char **why) {
    char *msg = NULL, *path = NULL, *tmp = NULL;
    int fd = -1, rc = -1;
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
    if (mkdirs(dir) != 0) {
        msg = graph_strdupf("disk cache: cannot create folder '%s': %s", dir, strerror(errno));
        goto done;
    }
    if (!(path = graph_strdupf("%s/%s", dir, key))) goto done;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        graph_free(tmp);
        tmp = graph_strdupf("%s/.tmp-%s-%ld-%lu", dir, key, (long)getpid(),
                   atomic_fetch_add(&tmp_counter, 1));
        if (!tmp) goto done;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST && errno != EINTR) break;
    }
    if (fd < 0) {
        msg = graph_strdupf("disk cache: cannot create '%s': %s", tmp, strerror(errno));
        graph_free(tmp);
        tmp = NULL; /* not ours: nothing to remove */
        goto done;
    }
    uint8_t t[DISKCACHE_TRAILER];
    make_trailer(t, data, len);
    if (fileio_write_all(fd, data, len) != 0 || fileio_write_all(fd, t, sizeof t) != 0) {
        msg = graph_strdupf("disk cache: cannot write '%s': %s", tmp, strerror(errno));
        goto done;
    }
    int cfd = fd;
    fd = -1;
    if (close(cfd) != 0) { /* delayed write errors (NFS, quota) show up here */
        msg = graph_strdupf("disk cache: cannot write '%s': %s", tmp, strerror(errno));
        goto done;
    }
    if (rename(tmp, path) != 0) {
        msg = graph_strdupf("disk cache: cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        goto done;
    }
    graph_free(tmp);
    tmp = NULL;
    rc = 0;
done:
    if (fd >= 0) close(fd);
    if (tmp) {
        unlink(tmp);
        graph_free(tmp);
    }
    graph_free(path);
    if (why) *why = msg;
    else graph_free(msg);
    return rc;
}

/* ---- remove and lock ------------------------------------------------------ */

void diskcache_remove(const char *dir, const char *key) {
    if (!dir || !key_ok(key)) return;
    char *path = graph_strdupf("%s/%s", dir, key);
    if (path) unlink(path);
    graph_free(path);
}

/* Opens and locks <dir>/.lock-<key>. The holder unlinks the file before it
 * unlocks (diskcache_unlock), so a waiter that wakes holding the lock of an
 * unlinked file must start over: the lock counts only while fd's inode is
 * still the one the path names. */
int diskcache_lock(const char *dir, const char *key, double timeout_s, char **path_out) {
    *path_out = NULL;
    if (!dir || !key_ok(key)) return -1;
    char *path = graph_strdupf("%s/.lock-%s", dir, key);
    if (!path) return -1;
    if (mkdirs(dir) != 0) {
        graph_free(path);
        return -1;
    }
    double deadline = graph_now_seconds() + (timeout_s > 0 ? timeout_s : 0);
    long wait_ns = 1000000; /* 1 ms, doubling to 50 ms */
    for (;;) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
        if (fd < 0) break;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            struct stat a, b;
            if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
                *path_out = path;
                return fd;
            }
            close(fd); /* unlinked by the holder we waited for: take the new file */
            continue;
        }
        int e = errno;
        close(fd);
        if (e != EWOULDBLOCK && e != EINTR) break;
        if (graph_now_seconds() >= deadline) break;
        struct timespec ts = {0, wait_ns};
        nanosleep(&ts, NULL);
        if (wait_ns < 50000000) wait_ns *= 2;
    }
    graph_free(path);
    return -1;
}

void diskcache_unlock(int fd, char *path) {
    if (fd < 0) return;
    if (path) unlink(path);
    close(fd);
    graph_free(path);
}
