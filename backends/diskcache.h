/* backends/diskcache.h: the on-disk level of the kernel cache.
 *
 * An entry is the file <dir>/<key>: the payload bytes, then a 48-byte trailer
 * of magic "LFKCACH1", the payload length (uint64, little-endian) and the
 * SHA-256 of the payload. Entries are written to a temp file and renamed into
 * place, so readers see a whole old entry, a whole new one, or none; every
 * read is verified, so a torn or tampered file is never returned. Shared by
 * the CPU (shared objects) and CUDA (cubins) backends.
 */
#ifndef LF_DISKCACHE_H
#define LF_DISKCACHE_H

#include <stddef.h>

#define DISKCACHE_MAGIC "LFKCACH1"
#define DISKCACHE_TRAILER 48 /* magic 8 + length 8 + SHA-256 32 */

/* The cache folder: opt_dir when non-NULL and non-empty, else $LF_CACHE_DIR,
 * else $XDG_CACHE_HOME/lazyfuse (only when absolute, as the XDG spec says),
 * else $HOME/.cache/lazyfuse (empty variables count as unset). graph_malloc'd;
 * NULL when none can be formed (no HOME) or out of memory. */
char *diskcache_dir(const char *opt_dir);

typedef enum {
    DISKCACHE_HIT,     /* *data, *len hold the verified payload */
    DISKCACHE_MISS,    /* no entry (or no/unreadable dir, bad key, read error) */
    DISKCACHE_CORRUPT, /* an entry failed a check and was unlinked (best effort) */
    DISKCACHE_NOMEM    /* out of memory */
} diskcache_result;

/* Reads entry key of dir and verifies it (size >= 48, magic, length field ==
 * file size - 48, SHA-256). HIT: *data (graph_malloc'd; NULL when len is 0)
 * and *len hold the payload; any other result sets *data = NULL, *len = 0.
 * Keys must be non-empty, hold no '/' and not start with '.' (else MISS).
 * Never returns unverified bytes. */
diskcache_result diskcache_get(const char *dir, const char *key, void **data, size_t *len);

/* Stores payload under key atomically: creates dir (and parents, mode 0700)
 * if missing, writes payload + trailer to a unique temp file in dir
 * (".tmp-<key>-<pid>-<counter>", O_EXCL, mode 0600), then rename()s it over
 * <dir>/<key>. Returns 0, or -1 with *why (graph_malloc'd message naming the
 * path and the strerror; NULL when even that allocation failed; why itself
 * may be NULL) when the key is bad, the dir is unwritable etc.; the temp file
 * is removed on failure. Callers treat failure as "no disk cache". */
int diskcache_put(const char *dir, const char *key, const void *data, size_t len, char **why);

/* Removes entry key of dir (an entry that verified but failed to load or
 * bind: the caller rebuilds it). Best effort; nothing for a bad key. */
void diskcache_remove(const char *dir, const char *key);

/* Serializes building entry key among processes: takes flock(LOCK_EX) on
 * <dir>/.lock-<key> (created 0600 if missing, never through a symlink),
 * waiting at most timeout_s (polling with LOCK_NB, 1 ms doubling to 50 ms),
 * so that N processes starting cold compile a kernel once: the first
 * compiles and stores, the others wake, find the entry and load it. Returns
 * the locked fd and sets *path (graph_malloc'd), or -1 with *path NULL when
 * the lock cannot be had in time (a holder stopped, an unwritable folder):
 * the caller then builds the entry without it. The lock dies with its holder
 * (flock), so a killed compile never blocks the others for good. */
int diskcache_lock(const char *dir, const char *key, double timeout_s, char **path);
/* Releases a lock of diskcache_lock: unlinks the lock file (so none is left
 * behind), then closes fd, and frees path. fd < 0 is a no-op. */
void diskcache_unlock(int fd, char *path);

#endif
